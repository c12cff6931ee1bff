#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# contrib/completion/ringctl and ringrun: sourced into bash, they complete commands,
# options, option values, and (ringctl) job ids from a running ringd.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${RINGCTL:?}"
COMPLETION="$(cd "$(dirname "$0")/../.." && pwd)/contrib/completion"

# complete FILE WORD...: what bash offers for the last WORD (the one being typed) of the
# command line WORD..., one per line, sorted. A new bash each time, as a new shell would.
complete_line() {
    local file=$1
    shift
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
             "$(complete -p "$(basename "$1")" | sed "s/.*-F \([^ ]*\) .*/\1/")"
             printf "%s\n" "${COMPREPLY[@]}"' complete "$COMPLETION/$file" "$@" | sort
}
# expect_completion FILE WANT WORD...: the offers are exactly WANT (newline-separated).
expect_completion() {
    local file=$1 want=$2 got
    shift 2
    got=$(complete_line "$file" "$@")
    [ "$got" = "$want" ] || fail "'$*<TAB>' offers '$(echo $got)', want '$(echo $want)'"
}

expect_completion ringctl "submit" ringctl su
expect_completion ringctl "$(printf 'show\nstop\nsubmit')" ringctl --json s
expect_completion ringctl "--cacert" ringctl --ca
expect_completion ringctl "dynamic" ringctl policy d
expect_completion ringctl RUNNING ringctl ls --state RU
expect_completion ringctl "create" ringctl token cr
expect_completion ringctl "--tail" ringctl logs j-1 --ta
expect_completion ringctl "backup" ringctl admin b
ok "ringctl: commands, global options, a command's options and their values"

touch "$WORK/spec.yaml"
expect_completion ringctl "$WORK/spec.yaml" ringctl submit -f "$WORK/spec.y"
expect_completion ringctl "$WORK/spec.yaml" ringctl --cacert "$WORK/spec.y"
ok "ringctl: files where a file is wanted"

# Job ids, from the ringd the environment names.
ringd_start "$WORK/data" --no-auth
export RINGMASTER_URL=$URL
id=$("$RINGCTL" submit -n 1 -- /bin/true)
expect_completion ringctl "$id" "$RINGCTL" show j-
expect_completion ringctl "$id" "$RINGCTL" --json logs ""
[ -z "$(RINGMASTER_URL=http://127.0.0.1:1 complete_line ringctl "$RINGCTL" show "")" ] ||
    fail "job ids offered without a ringd"
ringd_stop
ok "ringctl: job ids from the running ringd, nothing when it cannot be reached"

expect_completion ringrun "--timeout" ringrun -np 2 --time
expect_completion ringrun "$(printf -- '--gpus\n--gpus-per-rank')" ringrun --gp
expect_completion ringrun "$WORK/spec.yaml" ringrun --hostfile "$WORK/spec.y"
# After the program, its own arguments: files, never ringrun's options.
expect_completion ringrun "" ringrun -np 2 --timeout 5 ./train --time
expect_completion ringrun "$WORK/spec.yaml" ringrun -np 2 ./train "$WORK/spec.y"
ok "ringrun: options until the program, then the program's arguments"

summary
