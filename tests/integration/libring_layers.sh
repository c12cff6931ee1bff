#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libring's folders are layers, and a file includes only its own layer's headers and those
# of the layers below (worker/libring/src/README.md says what each layer holds and why in
# this order):
#
#   base < bootstrap < transport < collectives < ops < engine < top (api.c, ring.c, ...)
#
# The order is the code's: the bootstrap speaks through base's sockets; the transports
# swap their addresses through the bootstrap's allgather and prove the bootstrap's job
# secret (auth.h); the collectives move bytes through the mesh; the ops run agreed
# collectives, the ring's through the collectives; the engine negotiates and hands to the
# ops. This check reads every #include "..." under src/ and fails on one that goes up, on a
# header that does not name its folder (src/ is the only internal include directory, so
# the folder is the layer), and on one from outside libring, which depends on nothing of
# the project. A strict order also leaves no room for an include circle between folders.
#
# Usage: libring_layers.sh [SRC]   (default: worker/libring/src of this tree)
set -euo pipefail

src=${1:-$(cd "$(dirname "$0")/../../worker/libring/src" && pwd)}
[ -d "$src/base" ] || { echo "FAIL: $src is not libring's src/ (no base/)"; exit 1; }
layers=(base bootstrap transport collectives ops engine top)

# rank LAYER: its place in the order, or nothing for a folder that is no layer.
rank() {
    local i
    for i in "${!layers[@]}"; do
        [ "${layers[$i]}" != "$1" ] || { echo "$i"; return; }
    done
}

bad=0
files=0
while IFS= read -r -d '' f; do
    rel=${f#"$src"/}
    case $rel in
    */*) layer=${rel%%/*} ;;
    *) layer=top ;;
    esac
    mine=$(rank "$layer")
    if [ -z "$mine" ]; then
        echo "FAIL: $rel: $layer/ is not one of libring's layers (${layers[*]})"
        bad=$((bad + 1))
        continue
    fi
    files=$((files + 1))
    # "NR:header" for each quoted include, conditional ones too.
    while IFS=: read -r line hdr; do
        case $hdr in
        ring.h) continue ;; # the public API (include/), below every layer
        ring_internal.h) theirs=$(rank top) to=top ;;
        */*)
            to=${hdr%%/*}
            theirs=$(rank "$to")
            if [ -z "$theirs" ] || [ ! -f "$src/$hdr" ]; then
                echo "FAIL: $rel:$line includes \"$hdr\", which is not a libring header" \
                    "under src/ (libring depends on nothing else of the project)"
                bad=$((bad + 1))
                continue
            fi
            ;;
        *)
            echo "FAIL: $rel:$line includes \"$hdr\" without its folder; name the layer" \
                "(\"transport/transport.h\")"
            bad=$((bad + 1))
            continue
            ;;
        esac
        if [ "$theirs" -gt "$mine" ]; then
            echo "FAIL: $rel:$line: $layer includes \"$hdr\" from $to, a layer above it" \
                "(${layers[*]})"
            bad=$((bad + 1))
        fi
    done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
        sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1:\2/' || true)
done < <(find "$src" -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)
[ "$files" -gt 20 ] || { echo "FAIL: only $files files read under $src"; exit 1; }
[ "$bad" -eq 0 ] || { echo "$bad include(s) break libring's layers"; exit 1; }
echo "ok: $files files of libring include only their own layer and the layers below"
