#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# ringd with real Unix users, made here: a job of user A attacks user B's jobs and files,
# ringd's data and root, as a hostile user would, and gets nothing. Then a ringd that is not
# root: a job races a stream of job starts for ringd's data. Each attack is one check here:
#
#   as root, jobs isolated (the multi-user set-up)
#     - B's run and checkpoint directories, and B's log through the logs API (a link);
#     - B's processes: command lines and environments in /proc (a PID namespace hides them);
#     - the admin token and the database, by name and through ringd's /proc;
#     - ringd's environment (a service secret, NOTIFY_SOCKET, CREDENTIALS_DIRECTORY);
#     - a process left behind (setsid) that outlives the job;
#     - working_dir probing: whether a directory exists where A cannot look;
#     - ":" in an mpirun job's command, which would start a program outside its slots;
#     - nvidia-smi planted on ringd's PATH, which ringd would run as root;
#     - ringd-exec that someone else can change, which ringd would run as root;
#     - descriptors ringd-exec would pass on, and the job's resource limits;
#     - ringd gone: the job must not run on unknown to anyone;
#   as root, isolation = none
#     - the database, its -wal and -shm, the token and the address files by name (0600);
#     - a FIFO planted as ringrun.log while ringd makes the attempt's directory, raced over
#       a stream of jobs: ringd's scheduler must never block on it;
#   as a normal user (one user: only ringd's data is at stake)
#     - a job that looks into every new process's /proc/PID/root, cwd and fds while a
#       stream of jobs starts: ringd-exec before it isolates itself shows ringd's data.
# Needs root (to make users and run ringd as root); in CI it must not skip.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${ATTACKER:?}"

[ "$(id -u)" -eq 0 ] || skip "needs root (makes Unix users, runs ringd as root)"
command -v useradd >/dev/null && command -v setpriv >/dev/null || skip "needs useradd and setpriv"
command -v mpirun >/dev/null || skip "needs Open MPI's mpirun (contrib/deps.sh)"

# Three users of this run only: A (the attacker), B (the victim), R (a non-root ringd).
UA=rmta$$ UB=rmtb$$ UR=rmtr$$
cleanup() {
    [ -z "${ringd_pid:-}" ] || kill -9 "$ringd_pid" 2>/dev/null || true
    for u in $UA $UB $UR; do
        pkill -9 -u "$u" 2>/dev/null || true
        userdel "$u" 2>/dev/null || true
    done
    lib_exit
}
trap cleanup EXIT
chmod 0755 "$WORK" # the users pass through it to their homes and run directories
for u in $UA $UB $UR; do
    useradd -M -U -d "$WORK/home-$u" -s /bin/sh "$u" || fail "useradd $u"
    mkdir -p "$WORK/home-$u"
    chown "$u:$u" "$WORK/home-$u"
    chmod 0700 "$WORK/home-$u"
done
HOMEA=$WORK/home-$UA HOMEB=$WORK/home-$UB
as_user() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }

# What the users run must be reachable by them: copies outside the build tree, whose path
# they may not pass through. ringd finds ringd-exec and ringrun next to itself.
SHARED=$WORK/shared
mkdir -p "$SHARED"
cp "$RINGD" "$(dirname "$RINGD")/ringd-exec" "$RINGRUN" "$ATTACKER" "$SHARED/"
chmod 0755 "$SHARED" "$SHARED"/*
RINGD=$SHARED/ringd

# api TOKEN METHOD PATH [BODY]: the status in $WORK/status, the body in $WORK/body
api() {
    local args=(-s -o "$WORK/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1")
    [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
    curl "${args[@]}" "$URL$3" >"$WORK/status"
}
want() { # want STATUS: the last api call answered STATUS
    [ "$(cat "$WORK/status")" = "$1" ] || { cat "$WORK/body" >&2; fail "got $(cat "$WORK/status"), want $1"; }
}
# submit TOKEN SPEC: the new job's id in $JOB
submit() {
    api "$1" POST /v1/jobs "$2"
    want 201
    JOB=$(jq -r .id "$WORK/body")
}
# wait_state TOKEN JOB SECONDS STATE...: until the job is in one of the states
wait_state() {
    local tok=$1 job=$2 end=$((SECONDS + $3)) s
    shift 3
    while :; do
        api "$tok" GET "/v1/jobs/$job"
        s=$(jq -r .state "$WORK/body")
        for w in "$@"; do [ "$s" = "$w" ] && return 0; done
        [ $SECONDS -lt $end ] || { jq . "$WORK/body" >&2; fail "job $job stayed $s, want $*"; }
        sleep 0.1
    done
}
run_dir() { api "$1" GET "/v1/jobs/$2"; jq -r '.attempts[-1].run_dir' "$WORK/body"; }
sh_job() { # sh_job SCRIPT [ARG...]: a JobSpec running /bin/sh -c SCRIPT
    local s=$1
    shift
    jq -cn --arg s "$s" '{name: "sh", command: (["/bin/sh", "-c", $s, "sh"] + $ARGS.positional)}' \
        --args "$@"
}
no_leak() { # no_leak FILE WHAT: FILE has no LEAK line
    if grep -q LEAK "$1"; then fail "$2: $(grep LEAK "$1" | head -5)"; fi
}

# ==== ringd as root, jobs isolated ===========================================================
DATA=$WORK/root
unset RINGD_DEFAULT_USER
# A service's environment, which no job may see; and an nvidia-smi that a user put on PATH.
mkdir -p "$WORK/userbin"
printf '#!/bin/sh\ntouch %s/nvidia-smi-ran\necho "GPU 0: fake"\n' "$WORK" >"$WORK/userbin/nvidia-smi"
chmod 0755 "$WORK/userbin/nvidia-smi"
unset RINGD_GPUS
PATH="$WORK/userbin:$PATH" SERVICE_SECRET=ringd-service-secret \
    NOTIFY_SOCKET=/run/systemd/notify CREDENTIALS_DIRECTORY=/run/credentials/ringd.service \
    RINGD_JOB_LIMITS="nofile=256:512,core=0" RINGD_SLOTS=8 ringd_start "$DATA"
ADMIN=$(cat "$DATA/admin.token")
[ ! -e "$WORK/nvidia-smi-ran" ] || fail "ringd ran the nvidia-smi it found on PATH, as root"
ok "ringd does not run an nvidia-smi found on PATH"
token() { # token USER: a new token mapped to USER
    api "$ADMIN" POST /v1/tokens "{\"name\":\"$1\",\"user\":\"$1\"}"
    want 201
    jq -r .token "$WORK/body"
}
TA=$(token "$UA") TB=$(token "$UB")

# B's job: a secret in its command line, its environment and its files; it runs on.
read -r -d '' VICTIM <<'EOF' || true
echo b-private >"$RING_RUN_DIR/private"; echo b-ckpt >"$RING_CHECKPOINT_DIR/ckpt"
echo b-log; exec sleep 300
EOF
spec=$(sh_job "$VICTIM" B-SECRET-ARG | jq -c '.env = {B_SECRET: "b-secret-env"}')
submit "$TB" "$spec"
BJOB=$JOB
wait_state "$TB" "$BJOB" 60 RUNNING
BRUN=$(run_dir "$TB" "$BJOB")
BCKPT=$DATA/checkpoints/$BJOB
wait_for 30 "B's job to write its files" '[ -s "$BRUN/private" ] && [ -s "$BCKPT/ckpt" ]'

# A's job: everything it finds goes to its stdout.
read -r -d '' SNOOP <<'EOF' || true
brun=$1 bckpt=$2 data=$3
echo "user $(id -un)"
cat "$brun/private" && echo LEAK-b-run-file
ls "$brun" && echo LEAK-b-run-dir
cat "$bckpt/ckpt" && echo LEAK-b-checkpoint
for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do
    # (as patterns that do not match this script's own command line)
    grep -a -q -e "B-SECRET-AR[G]" -e "b-secret-en[v]" "$f" 2>/dev/null && echo "LEAK-b-proc $f"
done
echo "processes $(ls -d /proc/[0-9]* | wc -l)"
cat "$data/admin.token" && echo LEAK-token
head -c 16 "$data/ringd.db" && echo LEAK-db
for p in /proc/[0-9]*; do cat "$p/root$data/admin.token" 2>/dev/null && echo "LEAK-proc-root $p"; done
cat /etc/shadow >/dev/null 2>&1 && echo LEAK-shadow
echo "limits $(ulimit -Sn) $(ulimit -Hn) $(ulimit -c)"
env | sed 's/^/env /'
ln -sf "$brun/private" "$RING_RUN_DIR/rank.0/stderr"
setsid sh -c 'exec sleep 1000' </dev/null >/dev/null 2>&1 &
echo snoop-done
EOF
submit "$TA" "$(sh_job "$SNOOP" "$BRUN" "$BCKPT" "$DATA")"
AJOB=$JOB
wait_state "$TA" "$AJOB" 60 SUCCEEDED FAILED
ARUN=$(run_dir "$TA" "$AJOB")
out=$ARUN/rank.0/stdout
grep -q snoop-done "$out" || { cat "$ARUN/ringrun.log" "$out" >&2; fail "A's job did not finish its script"; }
grep -qx "user $UA" "$out" || fail "A's job ran as $(grep '^user' "$out")"
no_leak "$out" "A's job reached B, ringd or root"
ok "A's job cannot read B's run or checkpoint directory, ringd's data, or /etc/shadow"
[ "$(awk '/^processes/ {print $2}' "$out")" -lt 10 ] ||
    fail "A's job sees $(awk '/^processes/ {print $2}' "$out") processes: not only its own"
ok "A's job sees only its own processes: not B's command line or environment, not ringd"
for v in SERVICE_SECRET NOTIFY_SOCKET CREDENTIALS_DIRECTORY RINGD_JOB_LIMITS; do
    if grep -q "^env $v=" "$out"; then fail "ringd's $v reached A's job"; fi
done
grep -qx "env HOME=$HOMEA" "$out" && grep -qx "env USER=$UA" "$out" && grep -qx "env LOGNAME=$UA" "$out" &&
    grep -q "^env PATH=/" "$out" || fail "A's job lacks its identity: $(grep '^env' "$out")"
ok "A's job gets its own HOME, USER, LOGNAME and PATH, and nothing of ringd's environment"
grep -qx "limits 256 512 0" "$out" || fail "job_limits not applied: $(grep '^limits' "$out")"
ok "A's job starts with job_limits (nofile 256:512, core 0)"
wait_for 20 "A's processes to end with A's job" '! pgrep -u "$UA" >/dev/null'
ok "a process A's job left behind (setsid) ends with the job"
api "$TA" GET "/v1/jobs/$AJOB/logs?rank=0&stream=stderr"
if grep -q b-private "$WORK/body"; then fail "the logs API served B's file through A's link"; fi
ok "a link to B's file as A's log is not served"

# working_dir: whether a directory exists in B's home must not show to A.
mkdir -p "$HOMEB/exists"
chown "$UB:$UB" "$HOMEB/exists"
api "$TA" POST /v1/jobs "{\"name\":\"p\",\"command\":[\"/bin/true\"],\"working_dir\":\"$HOMEB/exists\"}"
s1=$(cat "$WORK/status") d1=$(jq -r .detail "$WORK/body" | sed "s|$HOMEB/exists|PATH|")
api "$TA" POST /v1/jobs "{\"name\":\"p\",\"command\":[\"/bin/true\"],\"working_dir\":\"$HOMEB/nope\"}"
s2=$(cat "$WORK/status") d2=$(jq -r .detail "$WORK/body" | sed "s|$HOMEB/nope|PATH|")
[ "$s1 $d1" = "$s2 $d2" ] || fail "A can tell a directory of B's exists: '$s1 $d1' vs '$s2 $d2'"
[ "$s1" = 422 ] || fail "working_dir in B's home: $s1, want 422"
submit "$TA" "{\"name\":\"p\",\"command\":[\"/bin/true\"],\"working_dir\":\"$HOMEA\"}"
wait_state "$TA" "$JOB" 60 SUCCEEDED
ok "working_dir is checked as the job's user: B's private directories look alike to A"

# ":" in an mpirun job's command: another app context, outside the job's slots.
mkdir -p "$HOMEA/out"
chown "$UA:$UA" "$HOMEA/out"
spec=$(jq -cn --arg m "$HOMEA/out/escaped" '{name: "colon", launcher: "mpirun", workers: 1,
    command: ["/bin/echo", ":", "-H", "localhost:8", "-np", "2", "/usr/bin/touch", $m]}')
submit "$TA" "$spec"
wait_state "$TA" "$JOB" 60 SUCCEEDED FAILED
[ ! -e "$HOMEA/out/escaped" ] || fail "a ':' in an mpirun job's command started another program"
grep -qx ": -H localhost:8 -np 2 /usr/bin/touch $HOMEA/out/escaped" "$(run_dir "$TA" "$JOB")/rank.0/stdout" ||
    fail "the program did not get its words: $(cat "$(run_dir "$TA" "$JOB")"/rank.0/* "$(run_dir "$TA" "$JOB")/ringrun.log")"
ok "':' in an mpirun job's command reaches the program as a word, and starts nothing"

for f in ringd.db ringd.db-wal ringd.db-shm admin.token ringd.addr ringd.lock; do
    [ ! -e "$DATA/$f" ] || [ "$(stat -c %a "$DATA/$f")" = 600 ] ||
        fail "$f is $(stat -c %a "$DATA/$f"), want 600"
done
ok "ringd's files (the database, -wal, -shm, token, address, lock) are 0600"

# ringd goes away: the job is asked to stop, rather than running on unknown to anyone.
submit "$TA" "$(sh_job 'echo up; exec sleep 300')"
wait_state "$TA" "$JOB" 60 RUNNING
wait_for 20 "A's job to start" 'pgrep -u "$UA" -x sleep >/dev/null'
ringd_crash
wait_for 20 "A's job to stop once ringd is gone" '! pgrep -u "$UA" >/dev/null'
ok "when ringd dies, its jobs are stopped (parent-death signal)"
kill "$(pgrep -u "$UB" -x sleep)" 2>/dev/null || true

# ringd-exec: only root may change it, and nothing of ringd's reaches a job through it.
INST=$WORK/inst
mkdir -p "$INST"
cp "$SHARED/ringd" "$SHARED/ringd-exec" "$INST/"
chmod 0755 "$INST" "$INST"/*
chmod o+w "$INST/ringd-exec"
expect_rc 64 timeout 10 "$INST/ringd" --listen 127.0.0.1:0 --data-dir "$WORK/inst-data"
expect_in err "ringd-exec $INST/ringd-exec may be changed by others"
chmod o-w "$INST/ringd-exec"
chown "$UA" "$INST/ringd-exec"
expect_rc 64 timeout 10 "$INST/ringd" --listen 127.0.0.1:0 --data-dir "$WORK/inst-data"
chown root "$INST/ringd-exec"
chmod g+w "$INST"
expect_rc 64 timeout 10 "$INST/ringd" --listen 127.0.0.1:0 --data-dir "$WORK/inst-data"
expect_in err "lies in directory $INST"
ok "ringd refuses a ringd-exec that others than root can change (64)"
# Descriptors: one left open without close-on-exec (by a library, say) stays out of the job.
# shellcheck disable=SC2094
(exec 7<"$DATA/admin.token" && "$SHARED/ringd-exec" -- /bin/ls /proc/self/fd 3</dev/null) >"$WORK/fds"
[ "$(tr '\n' ' ' <"$WORK/fds")" = "0 1 2 3 " ] || fail "ringd-exec passed on descriptors: $(cat "$WORK/fds")"
ok "ringd-exec closes every descriptor above 2 before exec"

# ==== ringd as root, isolation = none ========================================================
DATA=$WORK/none
RINGD_SLOTS=4 ringd_start "$DATA" --isolation none
ADMIN=$(cat "$DATA/admin.token")
TA=$(token "$UA") TB=$(token "$UB")
submit "$TB" "$(sh_job 'echo b-private >"$RING_RUN_DIR/private"; echo b-ckpt >"$RING_CHECKPOINT_DIR/ckpt"')"
wait_state "$TB" "$JOB" 60 SUCCEEDED
BRUN=$(run_dir "$TB" "$JOB")
for f in "$BRUN/private" "$DATA/checkpoints/$JOB/ckpt"; do
    if as_user "$UA" cat "$f" 2>/dev/null; then fail "user A read B's $f"; fi
done
ok "isolation none: A cannot read B's run or checkpoint directory (0700, B's)"
for f in ringd.db ringd.db-wal ringd.db-shm admin.token ringd.addr ringd.lock; do
    [ -e "$DATA/$f" ] || continue
    [ "$(stat -c %a "$DATA/$f")" = 600 ] || fail "$f is $(stat -c %a "$DATA/$f"), want 600"
done
[ "$(stat -c %a "$DATA")" = 711 ] || fail "the data directory is $(stat -c %a "$DATA")"
if as_user "$UA" head -c 16 "$DATA/ringd.db" 2>/dev/null | grep -q SQLite; then
    fail "user A read the database by its name"
fi
ok "isolation none: the database, -wal, -shm and ringd's other files are 0600; A cannot read them"

# A database an older ringd left readable is made private at start.
ringd_stop
chmod 0644 "$DATA/ringd.db"
RINGD_SLOTS=4 ringd_start "$DATA" --isolation none
[ "$(stat -c %a "$DATA/ringd.db")" = 600 ] || fail "ringd left ringd.db $(stat -c %a "$DATA/ringd.db")"
grep -q "ringd.db was mode 644; made it 0600" "$WORK/ringd.log" || fail "ringd did not say it fixed ringd.db"
ok "a database left 0644 by an older ringd is made 0600 at start"
# job_limits that cannot be: refused at start, saying what to fix.
expect_rc 64 timeout 10 env RINGD_JOB_LIMITS=nofile=lots "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/bad"
expect_in err "job_limits: bad value for nofile"
expect_rc 64 timeout 10 env RINGD_JOB_LIMITS=files=10 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/bad"
expect_in err "unknown limit 'files'"
expect_rc 64 timeout 10 env RINGD_JOB_LIMITS=nofile=10:5 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/bad"
expect_rc 64 timeout 10 setpriv --reuid="$UR" --regid="$UR" --clear-groups env RINGD_JOB_LIMITS=nofile=unlimited "$RINGD" --listen 127.0.0.1:0 \
    --data-dir "$WORK/bad-$UR"
expect_in err "above ringd's own hard limit"
ok "job_limits that are malformed, or above a non-root ringd's own, are refused at start (64)"

# The race: A plants a FIFO as ringrun.log the moment each attempt's directory is A's.
as_user "$UA" "$SHARED/attacker" fifo "$DATA/runs" 120 >"$WORK/fifo.out" 2>&1 &
attacker=$!
sleep 0.5
jobs=()
for i in $(seq 40); do
    submit "$TA" '{"name":"race","command":["/bin/true"]}'
    jobs+=("$JOB")
done
end=$((SECONDS + 240)) # generous: the sanitizer runs start jobs slowly
for j in "${jobs[@]}"; do
    while :; do
        api "$TA" GET "/v1/jobs/$j"
        case $(jq -r .state "$WORK/body") in SUCCEEDED | FAILED) break ;; esac
        [ $SECONDS -lt $end ] || fail "ringd's scheduler hung: job $j is $(jq -r .state "$WORK/body") ($(grep -c PLANTED "$WORK/fifo.out") FIFOs planted)"
        sleep 0.1
    done
done
kill "$attacker" 2>/dev/null || true
wait "$attacker" 2>/dev/null || true
ok "40 jobs start and end while A plants FIFOs as ringrun.log ($(grep -c PLANTED "$WORK/fifo.out" || true) planted, after ringd had the log)"
ringd_stop

# ==== ringd as a normal user: one user, whose jobs must not reach ringd's data ==============
DATA=$WORK/user
mkdir -p "$DATA"
unset RINGD_DEFAULT_USER # jobs run as ringd's own user
cd "$DATA" # ringd's working directory: where a starting ringd-exec would show it
RINGD_AS=$UR RINGD_SLOTS=4 ringd_start "$DATA"
cd - >/dev/null
ADMIN=$(cat "$DATA/admin.token")
grep -q "not root: every job runs as this one user" "$WORK/ringd.log" ||
    fail "ringd does not say at start that without root it keeps no users apart"
ok "a ringd that is not root says that it runs every job as one user"
submit "$ADMIN" "$(jq -cn --arg a "$SHARED/attacker" --arg d "$DATA" \
    '{name: "snoop", command: [$a, "procroot", $d, "30"]}')"
SNOOPJOB=$JOB
wait_state "$ADMIN" "$SNOOPJOB" 60 RUNNING
for i in $(seq 150); do
    api "$ADMIN" POST /v1/jobs '{"name":"stream","command":["/bin/true"]}'
done
wait_state "$ADMIN" "$SNOOPJOB" 120 SUCCEEDED FAILED
out=$(run_dir "$ADMIN" "$SNOOPJOB")/rank.0/stdout
grep -q "^tried" "$out" || fail "the snooping job did not run: $(cat "$(dirname "$out")/../ringrun.log")"
no_leak "$out" "a job read ringd's data through a starting ringd-exec"
[ "$(awk '/^visible/ {print $2}' "$out")" -lt 10 ] ||
    fail "a job sees more processes than its own: $(cat "$out")"
ok "a job racing 150 job starts sees only its own processes, and nothing of ringd's data ($(tr '\n' ' ' <"$out"))"
for f in ringd.db ringd.db-wal ringd.db-shm admin.token ringd.addr ringd.lock; do
    [ ! -e "$DATA/$f" ] || [ "$(stat -c %a "$DATA/$f")" = 600 ] ||
        fail "$f is $(stat -c %a "$DATA/$f"), want 600"
done
ok "without root too, ringd's files are 0600"
ringd_stop

summary
