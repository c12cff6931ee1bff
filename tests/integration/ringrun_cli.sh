#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ringrun as a user meets it: output, environment, exit status, signals, bad arguments.
. "$(dirname "$0")/lib.sh"

expect_rc 0 "$RINGRUN" -np 2 sh -c 'echo out-$RING_RANK; echo err-$RING_RANK >&2'
expect_in out "[0]<stdout>:out-0"
expect_in out "[1]<stdout>:out-1"
expect_in err "[1]<stderr>:err-1"
ok "output is prefixed with the rank and stream"

expect_rc 0 "$RINGRUN" -np 3 -H localhost:3 sh -c \
    'echo env $RING_RANK $RING_SIZE $RING_LOCAL_RANK $RING_LOCAL_SIZE $RING_CROSS_RANK $RING_CROSS_SIZE ${RING_RENDEZVOUS%:*}'
expect_in out "[2]<stdout>:env 2 3 2 3 0 1 127.0.0.1"
expect_in out "[0]<stdout>:env 0 3 0 3 0 1 127.0.0.1"
ok "the worker contract is in every rank's environment"

expect_rc 0 "$RINGRUN" -np 2 --timeout 7 sh -c 'echo t=$RING_TIMEOUT_SECONDS'
expect_in out "[1]<stdout>:t=7"
ok "--timeout reaches the ranks as RING_TIMEOUT_SECONDS"

expect_rc 7 "$RINGRUN" -np 3 sh -c '[ $RING_RANK = 1 ] && exit 7; exit 0'
expect_in err "rank 1 exited with status 7"
# Its own lines carry the time (RFC 3339, UTC, milliseconds) and the level (common/log.h).
grep -qE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z error ringrun: rank 1 exited with status 7$" "$WORK/err" ||
    { cat "$WORK/err"; fail "ringrun's line lacks its time or level"; }
ok "ringrun exits with the failing rank's status, and says so in a dated line"

start=$(date +%s)
expect_rc 3 "$RINGRUN" -np 2 --kill-grace 1 sh -c '[ $RING_RANK = 0 ] && exit 3; exec sleep 60'
[ $(( $(date +%s) - start )) -lt 20 ] || fail "the surviving rank was not killed after the grace period"
expect_in err "killing the 1 remaining rank"
expect_in err "stopping the other ranks in 1 s"
ok "a failed rank gets the others killed after --kill-grace"

# The last rank to end fails: there is no one left to stop, and ringrun does not say so.
expect_rc 3 "$RINGRUN" -np 2 sh -c '[ $RING_RANK = 0 ] && exit 0; sleep 1; exit 3'
grep -q "stopping the other ranks" "$WORK/err" && { cat "$WORK/err"; fail "ringrun announced stopping ranks that had ended"; }
ok "a failure of the last rank does not announce stopping the others"

# Each rank says "ready" once its trap is set: a SIGTERM before that would kill the shell
# instead of running the trap.
"$RINGRUN" -np 2 sh -c 'trap "echo got-term; exit 5" TERM; echo ready; sleep 30 & wait' \
    >"$WORK/out" 2>&1 &
pid=$!
wait_for 30 "both ranks set their SIGTERM trap" '[ "$(grep -c ready "$WORK/out")" = 2 ]'
kill -TERM $pid
rc=0; wait $pid || rc=$?
[ "$rc" = 5 ] || { cat "$WORK/out"; fail "SIGTERM: ringrun exited $rc, want 5"; }
[ "$(grep -c 'got-term' "$WORK/out")" = 2 ] || { cat "$WORK/out"; fail "not every rank got SIGTERM"; }
ok "SIGTERM is forwarded to every rank"

# SIGINT (Ctrl-C) reaches every rank and works there, even when ringrun itself was started
# with SIGINT ignored (as a shell script's background command is): the ranks must not
# inherit that, or the forwarded signal does nothing and they are killed after the grace.
(trap '' INT; exec "$RINGRUN" -np 2 sh -c 'trap "echo got-int; exit 6" INT; echo ready; sleep 30 & wait') \
    >"$WORK/out" 2>&1 &
pid=$!
wait_for 30 "both ranks set their SIGINT trap" '[ "$(grep -c ready "$WORK/out")" = 2 ]'
kill -INT $pid
rc=0; wait $pid || rc=$?
[ "$rc" = 6 ] || { cat "$WORK/out"; fail "SIGINT: ringrun exited $rc, want 6"; }
[ "$(grep -c 'got-int' "$WORK/out")" = 2 ] || { cat "$WORK/out"; fail "not every rank got SIGINT"; }
ok "SIGINT is forwarded to every rank, and acts there even if ringrun's was ignored"

# Under nohup (SIGHUP ignored) a hangup neither stops ringrun nor reaches its ranks.
(trap '' HUP; exec "$RINGRUN" -np 2 sh -c 'echo ready; sleep 2; echo survived') >"$WORK/out" 2>&1 &
pid=$!
wait_for 30 "both ranks started" '[ "$(grep -c ready "$WORK/out")" = 2 ]'
kill -HUP $pid
rc=0; wait $pid || rc=$?
[ "$rc" = 0 ] || { cat "$WORK/out"; fail "nohup: a SIGHUP made ringrun exit $rc, want 0"; }
[ "$(grep -c survived "$WORK/out")" = 2 ] || { cat "$WORK/out"; fail "nohup: a rank died of SIGHUP"; }
ok "under nohup a SIGHUP reaches no rank"

expect_rc 0 "$RINGRUN" -np 2 --output-dir "$WORK/logs" sh -c 'echo to-file-$RING_RANK; echo e >&2'
grep -qx "to-file-1" "$WORK/logs/rank.1/stdout" || fail "--output-dir did not write rank.1/stdout"
grep -qx "e" "$WORK/logs/rank.0/stderr" || fail "--output-dir did not write rank.0/stderr"
ok "--output-dir writes one file per rank and stream"

printf 'localhost slots=2\n' >"$WORK/hostfile"
expect_rc 0 "$RINGRUN" --hostfile "$WORK/hostfile" sh -c 'echo n=$RING_SIZE'
expect_in out "[1]<stdout>:n=2"
# Open MPI's hostfile form: ranks go on slots; max_slots (the oversubscription cap) alone
# gives the slots too; a malformed value is refused naming the line.
printf 'localhost slots=2 max_slots=4\n' >"$WORK/hostfile"
expect_rc 0 "$RINGRUN" --hostfile "$WORK/hostfile" sh -c 'echo n=$RING_SIZE'
expect_in out "[1]<stdout>:n=2"
expect_rc 64 "$RINGRUN" -np 3 --hostfile "$WORK/hostfile" true
expect_in err "-np 3 is more than the 2 slots of the host list (--oversubscribe allows more)"
expect_rc 0 "$RINGRUN" -np 4 --oversubscribe --hostfile "$WORK/hostfile" \
    sh -c 'echo "n=$RING_SIZE local=$RING_LOCAL_RANK/$RING_LOCAL_SIZE"'
expect_in out "[3]<stdout>:n=4 local=3/4"
expect_rc 64 "$RINGRUN" -np 5 --oversubscribe --hostfile "$WORK/hostfile" true
expect_in err "-np 5 is more than the 4 max_slots"
printf 'localhost max_slots=3\n' >"$WORK/hostfile"
expect_rc 0 "$RINGRUN" --hostfile "$WORK/hostfile" sh -c 'echo n=$RING_SIZE'
expect_in out "[2]<stdout>:n=3"
printf '# cluster\nlocalhost slots=2 max_slots=many\n' >"$WORK/hostfile"
expect_rc 64 "$RINGRUN" --hostfile "$WORK/hostfile" true
expect_in err "$WORK/hostfile:2: bad value in 'max_slots=many' for host 'localhost'"
printf 'localhost slots=2 max_slots=1\n' >"$WORK/hostfile"
expect_rc 64 "$RINGRUN" --hostfile "$WORK/hostfile" true
expect_in err "max_slots=1 is less than slots=2"
printf 'localhost slots=2\n' >"$WORK/hostfile"
ok "--hostfile gives the slots and, without -np, the rank count; max_slots bounds --oversubscribe"

# Bad arguments: each gets a clear message and a documented exit code.
expect_rc 64 "$RINGRUN" -np 5 -H localhost:2 true
expect_in err "-np 5 is more than the 2 slots"
expect_rc 64 "$RINGRUN" -np 2 -H 'local host:2' true
expect_in err "bad host name"
expect_rc 64 "$RINGRUN" -np 2 -H 'localhost:two' true
expect_in err "bad slot count"
expect_rc 64 "$RINGRUN" -np 0 true
expect_in err "-np '0' must be a positive integer"
expect_rc 64 "$RINGRUN" -np 2
expect_in err "no program given"
expect_rc 64 "$RINGRUN" -np 2 --bogus true
expect_in err "unknown option '--bogus'"
expect_rc 64 "$RINGRUN" -np
expect_in err "unknown option '-np' or missing value"
expect_rc 64 "$RINGRUN" -np 2 --hostfile "$WORK/missing" true
expect_in err "cannot open hostfile"
expect_rc 64 "$RINGRUN" -np 2 --output-dir "$WORK/hostfile" true
expect_in err "--output-dir $WORK/hostfile is not a directory"
ok "bad arguments exit 64 with a message"

expect_rc 127 "$RINGRUN" -np 2 "$WORK/no-such-program"
expect_in err "No such file or directory"
expect_rc 127 "$RINGRUN" -np 2 no-such-command-anywhere
expect_in err "command not found"
printf '#!/bin/sh\n' >"$WORK/not-exec"
chmod -x "$WORK/not-exec"
expect_rc 126 "$RINGRUN" -np 2 "$WORK/not-exec"
expect_in err "not an executable file"
ok "a missing program exits 127, a non-executable one 126"

# Hold a port with one ringrun, then ask a second for the same one. The holder listens
# before it starts its rank, so once the rank has printed, the port is taken; it keeps the
# port until it is killed. Another process may take a free port first: then try another.
for _ in $(seq 20); do
    port=$(free_port)
    "$RINGRUN" -np 1 --port $port sh -c 'echo holding; exec sleep 120' >"$WORK/holder" 2>&1 &
    holder=$!
    wait_for 30 "the port holder to start or fail" \
        'grep -q holding "$WORK/holder" || ! kill -0 $holder 2>/dev/null'
    grep -q holding "$WORK/holder" && break
    wait $holder || true
done
grep -q holding "$WORK/holder" || fail "no port could be held: $(cat "$WORK/holder")"
expect_rc 69 "$RINGRUN" -np 1 --port $port true
expect_in err "port $port is in use"
kill $holder
wait $holder || true
ok "a rendezvous port in use exits 69 with a message"

expect_rc 0 "$RINGRUN" --version
expect_in out "ringrun "
ok "--version"

# A ringrun that is itself a task of srun --mpi=pmix or mpirun passes no PMIx identity on:
# its ranks meet at its rendezvous, and libring would take PMIx first.
expect_rc 0 env PMIX_RANK=3 PMIX_NAMESPACE=outer "$RINGRUN" -np 2 sh -c 'echo "pmix=${PMIX_RANK:-none}/${PMIX_NAMESPACE:-none}"'
expect_in out "[1]<stdout>:pmix=none/none"
ok "ringrun's own ranks get no PMIX_* variables from ringrun's environment"

# The job's secret: a local rank finds it in its environment; a remote one reads it from its
# shell's standard input, and it never appears on the remote command line. The "remote
# shell" here records what it was given, then runs the command as ssh would.
cat >"$WORK/rsh" <<'SH'
#!/bin/sh
# rsh HOST CMD: keeps its arguments and its standard input, then runs CMD with that input.
shift
printf '%s\n' "$*" >>"$RSH_LOG.args"
tee -a "$RSH_LOG.stdin" | sh -c "$1"
SH
chmod +x "$WORK/rsh"
printrank='echo "rank $RING_RANK secret ${#RING_JOB_SECRET}"'
RSH_LOG=$WORK/rsh expect_rc 0 "$RINGRUN" -np 3 -H "localhost:1,remotehost:2" --rsh "$WORK/rsh" \
    --rendezvous-addr 127.0.0.1 sh -c "$printrank"
for r in 0 1 2; do expect_in out "[$r]<stdout>:rank $r secret 64"; done
[ "$(wc -l <"$WORK/rsh.args")" = 2 ] || fail "the remote shell ran $(wc -l <"$WORK/rsh.args") times, not 2"
secrets=$(grep -Ec '^[0-9a-f]{64}$' "$WORK/rsh.stdin")
[ "$secrets" = 2 ] && [ "$(wc -l <"$WORK/rsh.stdin")" = 2 ] ||
    { cat "$WORK/rsh.stdin"; fail "each remote shell should get the secret, alone, on its standard input"; }
secret=$(head -1 "$WORK/rsh.stdin")
! grep -q "$secret" "$WORK/rsh.args" "$WORK/out" "$WORK/err" ||
    fail "the job's secret is on the remote command line or in the output"
[ "$(sort -u "$WORK/rsh.stdin" | wc -l)" = 1 ] || fail "the remote ranks got different secrets"
ok "the job's secret: in a local rank's environment, on a remote rank's standard input, never on a command line"

# A --rsh that does not pass standard input on: the rank says why, not a hang.
printf '#!/bin/sh\nshift\nexec sh -c "$1" </dev/null\n' >"$WORK/rsh-noin"
chmod +x "$WORK/rsh-noin"
expect_rc 1 "$RINGRUN" -np 1 -H remotehost:1 --rsh "$WORK/rsh-noin" --rendezvous-addr 127.0.0.1 true
expect_in err "no job secret on standard input (does --rsh pass it on?)"
expect_rc 64 "$RINGRUN" -np 1 -x RING_JOB_SECRET=00 true
expect_in err "ringrun makes the job's secret itself"
ok "a remote shell without standard input says so; -x RING_JOB_SECRET is refused"

summary
