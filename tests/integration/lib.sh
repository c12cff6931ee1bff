# SPDX-License-Identifier: Apache-2.0
# Helpers for the integration scripts: sourced, not run.
set -euo pipefail

: "${RINGRUN:?RINGRUN must name the ringrun binary (ctest sets it)}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringtest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
passed=0

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

ok() {
    passed=$((passed + 1))
    echo "ok $passed - $*"
}

# expect_rc WANT CMD...: runs CMD with output in $WORK/out and $WORK/err, checks the status.
expect_rc() {
    local want=$1 rc=0
    shift
    "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
    if [ "$rc" != "$want" ]; then
        echo "--- stdout" >&2; cat "$WORK/out" >&2
        echo "--- stderr" >&2; cat "$WORK/err" >&2
        fail "'$*' exited $rc, want $want"
    fi
}

# expect_in FILE TEXT: FILE (out or err) contains TEXT.
expect_in() {
    grep -qF -- "$2" "$WORK/$1" || { cat "$WORK/$1" >&2; fail "$1 lacks '$2'"; }
}

summary() {
    echo "$passed passed, 0 failed"
}
