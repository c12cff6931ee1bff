#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The tree's folders include one another in one direction only (docs/design.md, "Layers"):
#   server -> api -> scheduler -> db -> common, and api -> db;
#   scheduler's rooms: sim -> core -> backend, policy -> model;
#   worker/ringrun -> worker/libring, common; worker/libring -> nothing of the tree (its own
#   layers are checked by libring_layers.sh).
# This test reads every #include "..." of the product code (no build needed), finds the file
# it names as the compiler would (beside the includer, from the repository root, then in the
# room's include directories below), and fails on an include that goes against the table, on
# one that reaches a file in no room, and on a circle between rooms.
#
# The rules are data: a room per row of ROOMS below (the longest folder that holds a file is
# its room), and the rooms it may include besides itself; "X/*" is X and every room below it.
# A new folder gets a row; a new dependency is a deliberate edit here, said in the commit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# room                      may include ("-": nothing but itself)
ROOMS=$(
    cat <<'EOF'
common                      -
db                          common
scheduler/model             common
scheduler/policy            scheduler/model common
scheduler/backend           scheduler/model common
scheduler/backend/local     scheduler/backend scheduler/model common
scheduler/backend/slurm     scheduler/backend scheduler/model common
scheduler/backend/sim       scheduler/backend scheduler/model common
scheduler/core              scheduler/backend scheduler/policy scheduler/model db common
scheduler/sim               scheduler/core scheduler/backend/sim scheduler/backend scheduler/policy scheduler/model common
api                         scheduler/core scheduler/backend scheduler/policy scheduler/model db common
api/ringctl                 common
server                      api scheduler/core scheduler/backend scheduler/policy scheduler/model db common
bench/sched                 scheduler/* common
worker/ringrun              worker/libring/* common
worker/libring              -
EOF
)

# room                      its include directories besides its own folder and the root
# (as CMake gives them: flat names that are not beside the includer resolve here)
SEARCH=$(
    cat <<'EOF'
worker/ringrun              worker/libring/include worker/libring/src
worker/libring              worker/libring/include worker/libring/src
EOF
)

declare -A allowed search
rooms=()
while read -r room deps; do
    [ -n "$room" ] || continue
    rooms+=("$room")
    allowed[$room]=$deps
done <<<"$ROOMS"
while read -r room dirs; do
    [ -n "$room" ] && search[$room]=$dirs
done <<<"$SEARCH"

# room_of PATH (relative to the root): the longest room that holds it, or "".
room_of() {
    local best="" r
    for r in "${rooms[@]}"; do
        case $1 in "$r"/*) [ ${#r} -gt ${#best} ] && best=$r ;; esac
    done
    echo "$best"
}

# may FROM TO: whether room FROM may include room TO.
may() {
    local d deps
    [ "$1" = "$2" ] && return 0
    read -ra deps <<<"${allowed[$1]}" # no pathname expansion of "X/*"
    for d in "${deps[@]}"; do
        case $d in
        -) ;;
        */\*) [ "$2" = "${d%/*}" ] || [[ $2 == "${d%/*}"/* ]] && return 0 ;;
        *) [ "$2" = "$d" ] && return 0 ;;
        esac
    done
    return 1
}

fail=0
declare -A edge # "FROM TO" -> an example include, for the circle's message
tops=$(for r in "${rooms[@]}"; do echo "${r%%/*}"; done | sort -u)
files=$(cd "$ROOT" && for t in $tops; do find "$t" -type f \( -name '*.c' -o -name '*.h' \); done | sort)
for f in $files; do
    from=$(room_of "$f")
    [ -n "$from" ] || continue
    dir=$(dirname "$f")
    while IFS= read -r inc; do
        to_file=""
        for cand in "$dir/$inc" "$inc" $(for s in ${search[$from]:-}; do echo "$s/$inc"; done); do
            if [ -f "$ROOT/$cand" ]; then
                to_file=$(realpath -m --relative-to="$ROOT" "$ROOT/$cand")
                break
            fi
        done
        [ -n "$to_file" ] || continue # not in the tree: a system or library header
        to=$(room_of "$to_file")
        if [ -z "$to" ]; then
            echo "layering: $f includes $to_file, which is in no room (add a row to ROOMS)"
            fail=1
            continue
        fi
        if ! may "$from" "$to"; then
            echo "layering: $f includes $to_file: $from may not include $to" \
                "(it may include: ${allowed[$from]})"
            fail=1
        fi
        [ "$from" != "$to" ] && edge["$from $to"]="$f -> $to_file"
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$ROOT/$f")
done

# Circles between rooms, from the includes as they are (the table may allow more than is used).
declare -A state # unset: not seen; 1: on the path; 2: done
path=()
visit() {
    local r=$1 e t
    state[$r]=1
    path+=("$r")
    for e in "${!edge[@]}"; do
        [ "${e%% *}" = "$r" ] || continue
        t=${e#* }
        if [ "${state[$t]:-0}" = 1 ]; then
            echo "layering: an include circle: ${path[*]} $t (e.g. ${edge[$e]})"
            fail=1
        elif [ "${state[$t]:-0}" = 0 ]; then
            visit "$t"
        fi
    done
    unset 'path[${#path[@]}-1]'
    state[$r]=2
}
for r in "${rooms[@]}"; do
    [ "${state[$r]:-0}" = 0 ] && visit "$r"
done

if [ "$fail" = 0 ]; then
    echo "layering: $(wc -w <<<"$files") files, ${#edge[@]} links between rooms, all in order"
fi
exit "$fail"
