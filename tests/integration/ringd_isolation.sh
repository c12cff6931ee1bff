#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A job must never reach ringd's secrets. As root, ringd runs each token's jobs as the
# token's Unix user; as any user, a job runs in a private mount namespace in which the data
# directory is empty but for its own run and checkpoint directories. These jobs try what a
# hostile user would: read the admin token and the database, look through /proc at ringd,
# undo the mount, and plant links and FIFOs where ringd reads logs and progress.
# Needs root (to run ringd as root, and as another user); in CI it must not skip.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"

[ "$(id -u)" -eq 0 ] || skip "needs root (runs ringd as root and as another user)"

# What nobody runs must be reachable by nobody, and the build folder may not be (a clone in
# a mktemp -d directory or under /root): ringrun, which ringd starts for the jobs, and, for
# the ringd that runs as nobody, ringd itself and the ringd-exec it finds next to itself. The
# copies are root's, 0755, in a directory of root's, as an installed ringd's would be.
SHARED=$(mktemp -d /tmp/ringiso.XXXXXX)
chmod 0755 "$SHARED" "$WORK" # job users pass through the data directory's parents
install -m 0755 "$RINGRUN" "$RINGD" "$(dirname "$RINGD")/ringd-exec" "$SHARED/"
trap 'lib_exit; rm -rf "$SHARED"' EXIT

RINGD=$SHARED/ringd
export RINGD_RINGRUN="$SHARED/ringrun"

# api TOKEN METHOD PATH [BODY]: the status in $WORK/status, the body in $WORK/body
api() {
    local args=(-s -o "$WORK/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1")
    [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
    curl "${args[@]}" "$URL$3" >"$WORK/status"
}
want() { # want STATUS: the last api call answered STATUS
    [ "$(cat "$WORK/status")" = "$1" ] || { cat "$WORK/body" >&2; fail "got $(cat "$WORK/status"), want $1"; }
}
# wait_state TOKEN JOB STATE...: until the job is in one of the states (60 s at most)
wait_state() {
    local tok=$1 job=$2 s
    shift 2
    for _ in $(seq 600); do
        api "$tok" GET "/v1/jobs/$job"
        s=$(jq -r .state "$WORK/body")
        for w in "$@"; do [ "$s" = "$w" ] && return 0; done
        sleep 0.1
    done
    fail "job $job stayed $s, want $*"
}

# ---- ringd as root: jobs run as the token's user -------------------------------------------
DATA="$WORK/root"
ringd_start "$DATA"
ADMIN=$(cat "$DATA/admin.token")
[ "$(stat -c %a "$DATA")" = 700 ] || fail "the data directory is $(stat -c %a "$DATA"), want 700"
ok "the data directory is 0700"

unset RINGD_DEFAULT_USER
ringd_stop
ringd_start "$DATA" # no default user now: the admin token maps to nobody
api "$ADMIN" POST /v1/jobs '{"name":"a","command":["/bin/true"]}'
want 403
jq -e '.type == "urn:ringmaster:problem:no-unix-user"' "$WORK/body" >/dev/null || fail "$(cat "$WORK/body")"
ok "as root, a token without a Unix user cannot submit (403 no-unix-user)"

api "$ADMIN" POST /v1/tokens '{"name":"eve","user":"no-such-user-here"}'
want 422
grep -q "no Unix user 'no-such-user-here'" "$WORK/body" || fail "$(cat "$WORK/body")"
api "$ADMIN" POST /v1/tokens '{"name":"eve","user":"nobody"}'
want 201
EVE=$(jq -r .token "$WORK/body")
[ "$(jq -r .user "$WORK/body")" = nobody ] || fail "token user: $(cat "$WORK/body")"
ok "a token maps to an existing Unix user, and only to one"

# The hostile job: everything it finds goes to its stdout, which the test reads back.
read -r -d '' SNOOP <<EOF || true
id -u
ls -a "$DATA"
cat "$DATA/admin.token" && echo LEAK-token
head -c 16 "$DATA/ringd.db" && echo LEAK-db
umount "$DATA" 2>/dev/null && echo LEAK-umount
for p in \$(pgrep -x ringd); do cat /proc/\$p/root$DATA/admin.token 2>/dev/null && echo LEAK-proc; done
rm -f "\$RING_RUN_DIR/rank.0/stderr"; ln -s "$DATA/admin.token" "\$RING_RUN_DIR/rank.0/stderr"
mkfifo "\$RING_RUN_DIR/progress.json"
stat -c '%U %a' "\$RING_RUN_DIR" "\$RING_CHECKPOINT_DIR"
echo snoop-done
EOF
api "$EVE" POST /v1/jobs "$(jq -cn --arg s "$SNOOP" '{name:"snoop",command:["/bin/sh","-c",$s]}')"
want 201
JOB=$(jq -r .id "$WORK/body")
[ "$(jq -r .user "$WORK/body")" = nobody ] || fail "job user: $(cat "$WORK/body")"
wait_state "$EVE" "$JOB" SUCCEEDED FAILED
RUN=$(jq -r '.attempts[-1].run_dir' "$WORK/body")
out="$RUN/rank.0/stdout"
[ "$(jq -r .state "$WORK/body")" = SUCCEEDED ] || { cat "$RUN/ringrun.log" >&2; fail "snoop failed"; }
grep -q snoop-done "$out" || fail "the job did not finish its script: $(cat "$RUN/ringrun.log")"
[ "$(head -1 "$out")" = 65534 ] || fail "the job ran as uid $(head -1 "$out"), want nobody (65534)"
ok "the job ran as the token's user (nobody)"
grep -q LEAK "$out" && fail "the job reached ringd's secrets: $(grep LEAK "$out")"
grep -qx "ringd.db\|admin.token\|ringd.lock" "$out" && fail "the job saw the data directory: $(cat "$out")"
ok "the job could not read the admin token, the database, or ringd's /proc, nor unmount"
grep -qx "nobody 700" "$out" || fail "run/checkpoint directories: $(cat "$out")"
[ "$(grep -c 'nobody 700' "$out")" = 2 ] || fail "run/checkpoint directories: $(cat "$out")"
ok "the job's run and checkpoint directories are its user's, 0700"

# ringd reads the job's files with its own privileges: a planted link or FIFO gets nothing.
api "$ADMIN" GET "/v1/jobs/$JOB/logs?rank=0&stream=stderr"
want 404
grep -q "$(cut -c1-20 "$DATA/admin.token")" "$WORK/body" && fail "the log route leaked the admin token"
ok "a log that is a link to the admin token is not served"
timeout 10 curl -sf -H "Authorization: Bearer $ADMIN" "$URL/v1/jobs/$JOB" >"$WORK/body" ||
    fail "GET job with a FIFO as progress.json did not answer"
ok "a FIFO as progress.json does not hang ringd"
api "$ADMIN" DELETE "/v1/jobs/$JOB"
want 204
[ -f "$DATA/admin.token" ] || fail "deleting the job removed the admin token"
[ ! -e "$DATA/runs/$JOB" ] || fail "the run directory is still there"
ok "DELETE removes the run directory without following its links"
ringd_stop

# ---- --no-auth as root must name the account jobs run as -------------------------------------
expect_rc 64 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/noauth" --no-auth
expect_in err "--default-user"
ok "as root, --no-auth without --default-user is refused (64)"

# ---- ringd as a normal user: the same user, but the data directory is out of reach --------
DATA="$WORK/user"
mkdir -p "$DATA"
RINGD_AS=nobody ringd_start "$DATA"
ADMIN=$(cat "$DATA/admin.token")
api "$ADMIN" POST /v1/tokens '{"name":"mallory","user":"root"}'
want 422
grep -q "cannot start jobs as 'root'" "$WORK/body" || fail "$(cat "$WORK/body")"
ok "a ringd that is not root refuses to map a token to another user"
api "$ADMIN" POST /v1/jobs "$(jq -cn --arg s "$SNOOP" '{name:"snoop",command:["/bin/sh","-c",$s]}')"
want 201
JOB=$(jq -r .id "$WORK/body")
wait_state "$ADMIN" "$JOB" SUCCEEDED FAILED
RUN=$(jq -r '.attempts[-1].run_dir' "$WORK/body")
out="$RUN/rank.0/stdout"
grep -q snoop-done "$out" || fail "the job did not finish its script: $(cat "$RUN/ringrun.log")"
grep -q LEAK "$out" && fail "a job of ringd's own user reached its secrets: $(grep LEAK "$out")"
grep -qx "ringd.db\|admin.token\|ringd.lock" "$out" && fail "the job saw the data directory: $(cat "$out")"
ok "a job of ringd's own user cannot read the token, the database or ringd's /proc"
ringd_stop

summary
