#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ringctl against a real ringd: every command, --json, and its exit codes.
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${RINGCTL:?}" "${TRAIN:?}"

DATA=$WORK/data
export RINGD_SLOTS=2
ringd_start "$DATA"
export RINGMASTER_URL="$URL" RINGMASTER_TOKEN="$(cat "$DATA/admin.token")"
C=$RINGCTL

expect_rc 0 "$C" submit -n 2 --label team=vision --env SEED=1 -- "$TRAIN" --epochs 3
id=$(cat "$WORK/out")
expect_rc 0 "$C" events "$id" -f
expect_in out "succeeded  SUCCEEDED"
expect_rc 0 "$C" show "$id"
expect_in out "progress   epoch 3/3"
expect_rc 0 "$C" logs "$id" --tail 1
expect_in out "final loss"
expect_rc 0 "$C" --json ls --label team=vision
jq -e --arg id "$id" '.jobs[0].id == $id and .jobs[0].spec.env.SEED == "1"' "$WORK/out" >/dev/null || fail "ls --json"
ok "submit from flags, events -f, show, logs, ls --json"

# -f streams: the output of a running job as it is written, until the job ends.
expect_rc 0 "$C" submit -n 2 -- "$TRAIN" --epochs 4 --step-sleep-ms 2
fid=$(cat "$WORK/out")
expect_rc 0 "$C" logs "$fid" -f
expect_in out "epoch 1"
expect_in out "final loss"
[ "$(grep -c 'final loss' "$WORK/out")" = 1 ] || fail "logs -f printed the end twice"
expect_rc 0 "$C" logs "$fid" --tail 1 -f # a finished job: its last line, and done
[ "$(wc -l <"$WORK/out")" = 1 ] && expect_in out "final loss"
expect_rc 0 "$C" --json events "$fid" -f
jq -e -s 'map(.type) | first == "submitted" and last == "succeeded"' "$WORK/out" >/dev/null ||
    fail "events -f --json: $(cat "$WORK/out")"
expect_rc 3 "$C" events j-0000000000000000 -f
expect_in err "there is no job j-0000000000000000"
grep -qE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z error ringctl: .*there is no job j-0000000000000000" "$WORK/err" ||
    { cat "$WORK/err"; fail "ringctl's line lacks its time or level"; }
expect_rc 3 "$C" logs j-0000000000000000 -f
ok "logs -f and events -f stream until the job ends; a missing job exits 3"

# A follower outlives a ringd restart: it reconnects and resumes after the last event seen.
expect_rc 0 "$C" submit -n 2 -- "$TRAIN" --epochs 40 --step-sleep-ms 2
rid=$(cat "$WORK/out")
"$C" events "$rid" -f >"$WORK/follow.out" 2>"$WORK/follow.err" &
follower=$!
wait_for 60 "the follower to see the job start" 'grep -q "started" "$WORK/follow.out"'
wait_for 60 "a checkpoint to resume from" '[ -f "$DATA/checkpoints/$rid/checkpoint.bin" ]'
ringd_crash
RINGD_LISTEN=$ADDR ringd_start "$DATA"
frc=0
wait "$follower" || frc=$?
if [ "$frc" != 0 ]; then
    cat "$WORK/follow.out" >&2
    grep -v 'msg=request\|msg="request' "$WORK/ringd.log" | tail -30 >&2
    find "$DATA/runs/$rid" -name stderr -exec tail -5 {} + >&2 2>/dev/null || true
    fail "events -f exited $frc across the restart: $(cat "$WORK/follow.err")"
fi
grep -q "requeued\|queued" "$WORK/follow.out" && grep -q "succeeded  SUCCEEDED" "$WORK/follow.out" ||
    fail "the follower missed events across the restart: $(cat "$WORK/follow.out")"
[ "$(grep -c "submitted" "$WORK/follow.out")" = 1 ] || fail "events were printed twice"
ok "events -f reconnects after ringd is killed and restarted, without repeating events"

printf '{"name":"fromfile","command":["/bin/sh","-c","exit 5"]}\n' >"$WORK/spec.json"
expect_rc 0 "$C" submit -f "$WORK/spec.json"
bad=$(cat "$WORK/out")
expect_rc 70 "$C" events "$bad" -f
expect_in out "failed     FAILED"
ok "submit -f; following a job that fails exits 70"

# A job that never reached its program: why is in the launcher's log, which the API serves.
expect_rc 0 "$C" submit -- /no/such/program
nf=$(cat "$WORK/out")
expect_rc 70 "$C" events "$nf" -f
expect_in out "command not found: '/no/such/program' (exit 127)"
expect_in out "ringctl logs $nf --launcher"
expect_rc 0 "$C" logs "$nf" --launcher
expect_in out "/no/such/program: No such file or directory"
expect_rc 0 "$C" logs "$nf" --launcher -f
expect_in out "/no/such/program: No such file or directory"
curl -sf -H "Authorization: Bearer $RINGMASTER_TOKEN" "$URL/v1/jobs/$nf/logs?stream=launcher" \
    >"$WORK/out" || fail "GET logs?stream=launcher failed"
expect_in out "No such file or directory"
expect_rc 2 "$C" logs "$nf" --launcher --stderr
ok "the launcher's log (a program not found: 127) is served: logs --launcher, stream=launcher"

cat >"$WORK/spec.yaml" <<'YAML'
# a YAML spec: comments, anchors, block and flow styles, typed scalars
name: from-yaml
command: [/bin/sh, -c, "exit 0"]
workers: {min: 1, max: 2}
max_restarts: 0x2
priority: -3
env:
  SEED: "7"
  MODE: 'fast'
labels:
  team: &t vision
  group: *t
YAML
expect_rc 0 "$C" submit -f "$WORK/spec.yaml"
yid=$(cat "$WORK/out")
expect_rc 0 "$C" --json show "$yid"
jq -e '.spec.name == "from-yaml" and .spec.workers.max == 2 and .spec.max_restarts == 2 and
    .spec.priority == -3 and .spec.env.SEED == "7" and .spec.env.MODE == "fast" and
    .spec.labels.team == "vision" and .spec.labels.group == "vision" and
    .spec.command[2] == "exit 0"' "$WORK/out" >/dev/null ||
    fail "the YAML spec arrived as $(jq -c .spec "$WORK/out")"
printf 'name: x\ncommand: [/bin/true]\nname: y\n' >"$WORK/dup.yaml"
expect_rc 2 "$C" submit -f "$WORK/dup.yaml"
expect_in err "dup.yaml:3:1: duplicate key 'name'"
printf 'name: x\ncommand: [/bin/true\n' >"$WORK/broken.yml"
expect_rc 2 "$C" submit -f "$WORK/broken.yml"
expect_in err "broken.yml:"
printf -- '- just\n- a list\n' >"$WORK/list.yaml"
expect_rc 2 "$C" submit -f "$WORK/list.yaml"
expect_in err "a job spec is a mapping"
printf 'name: x\ncommand: [/bin/true]\nworkers: 1\nenv: {N: 4}\n' >"$WORK/typed.yaml"
expect_rc 1 "$C" submit -f "$WORK/typed.yaml"
expect_in err "env.N"
ok "submit -f spec.yaml: typed scalars, flow and block styles; bad YAML says where"

# A program named relative to the current directory runs there, as it would from a shell.
mkdir -p "$WORK/proj"
printf '#!/bin/sh\necho "ran in $(pwd)"\n' >"$WORK/proj/prog.sh"
chmod +x "$WORK/proj/prog.sh"
(cd "$WORK/proj" && expect_rc 0 "$C" submit -- ./prog.sh)
rel=$(cat "$WORK/out")
expect_rc 0 "$C" events "$rel" -f
expect_rc 0 "$C" logs "$rel"
expect_in out "ran in $WORK/proj"
(cd "$WORK/proj" && expect_rc 0 "$C" submit -f "$WORK/spec.yaml") # absolute file, PATH program
expect_rc 0 "$C" --json show "$(cat "$WORK/out")"
jq -e '.spec.working_dir == null' "$WORK/out" >/dev/null || fail "working_dir set for /bin/sh"
ok "submit -- ./prog runs ./prog from the current directory"

# Numbers are numbers: '-n 2-4' (the range as ls shows it) must not quietly run 2 workers.
for bad in "-n 2-4" "-n 2:" "-n x" "-n 4:x" "-n 3:2x" "-g one" "-r 1.5" "-p 1e3"; do
    # shellcheck disable=SC2086
    expect_rc 2 "$C" submit $bad -- /bin/true
done
expect_rc 2 "$C" submit -n 2-4 -- /bin/true
expect_in err "-n '2-4' must be N or MIN:MAX"
expect_rc 2 "$C" logs "$rel" --tail ten
expect_in err "--tail 'ten' must be a non-negative integer"
expect_rc 2 "$C" logs "$rel" --rank x
expect_rc 0 "$C" --json ls
[ "$(jq '.jobs | length' "$WORK/out")" = "$(curl -s -H "Authorization: Bearer $RINGMASTER_TOKEN" \
    "$URL/v1/jobs?page_size=1000" | jq '.jobs | length')" ] || fail "a bad flag submitted a job"
ok "bad numbers in flags are usage errors (2), and nothing is submitted"

expect_rc 0 "$C" submit --help
expect_in out "usage: ringctl submit"
expect_rc 2 "$C" --cacert
expect_in err "--cacert needs a file"
ok "submit --help prints its usage (0); --cacert without a file is a usage error (2)"

# A job id is a path segment, never more of the URL.
expect_rc 3 "$C" show ../tokens
expect_rc 3 "$C" show 'j-x?y'
expect_rc 3 "$C" show 'a b'
expect_rc 3 "$C" cancel ../tokens
ok "odd job ids are not found (3), not other resources"

expect_rc 0 "$C" submit -- "$TRAIN" --epochs 1000 --step-sleep-ms 5
long=$(cat "$WORK/out")
wait_for 60 "job $long to run" '"$C" show "$long" | grep -q "state      RUNNING"'
expect_rc 0 "$C" cluster
expect_in out "$long"
expect_rc 0 "$C" cancel "$long"
expect_rc 70 "$C" events "$long" -f
expect_rc 4 "$C" cancel "$id"
expect_in err "already SUCCEEDED"
[ -d "$DATA/runs/$id" ] || fail "no run directory for $id"
expect_rc 0 "$C" rm "$id"
expect_rc 3 "$C" show "$id"
[ ! -e "$DATA/runs/$id" ] && [ ! -e "$DATA/checkpoints/$id" ] || fail "rm left the job's files"
ok "cluster, cancel, rm; 4 for a conflict, 3 for a missing job"

expect_rc 0 "$C" token create bob --user "$(id -un)"
BOB=$(cat "$WORK/out")
RINGMASTER_TOKEN=$BOB expect_rc 3 "$C" show "$long"
expect_rc 0 "$C" token list
expect_in out "bob"
grep "bob" "$WORK/out" | grep -qw "$(id -un)" || fail "token list lacks bob's Unix user"
expect_rc 1 "$C" token create carol --user no-such-user-here
expect_in err "no Unix user 'no-such-user-here'"
BOB_ID=$(cut -d_ -f2 <<<"$BOB")
expect_rc 0 "$C" token revoke "$BOB_ID"
expect_in out "revoked $BOB_ID (bob)"
RINGMASTER_TOKEN=$BOB expect_rc 5 "$C" ls
expect_rc 3 "$C" token revoke 000000000000
expect_rc 2 "$C" token frob
day1=$(date -u -d '+30 days' +%Y-%m-%d)
expect_rc 0 "$C" token create eve --expires-in 30d
day2=$(date -u -d '+30 days' +%Y-%m-%d)
EVE_ID=$(cut -d_ -f2 "$WORK/out")
expect_rc 0 "$C" --json token create eve --expires-at 2099-01-01T00:00:00+02:00
expect_in out '"expires_at": "2098-12-31T22:00:00Z"'
expect_rc 0 "$C" token list
expect_in out "EXPIRES"
grep "^$EVE_ID " "$WORK/out" | grep -Eq " ($day1|$day2)T" ||
    { cat "$WORK/out"; fail "token list does not show eve's expiry in 30 days"; }
grep "^$(cut -d_ -f2 <<<"$RINGMASTER_TOKEN") " "$WORK/out" | grep -qw never ||
    { cat "$WORK/out"; fail "token list does not say the admin token never expires"; }
expect_rc 2 "$C" token create eve --expires-in soon
expect_in err "--expires-in 'soon' must be a positive number of seconds"
expect_rc 2 "$C" token create eve --expires-in 0
expect_rc 1 "$C" token create eve --expires-at yesterday
expect_in err "expires_at must be an RFC 3339 date-time"
RINGMASTER_TOKEN=nope expect_rc 5 "$C" ls
RINGMASTER_URL=http://127.0.0.1:1 expect_rc 69 "$C" ls
expect_in err "cannot reach ringd"
# RINGMASTER_URL as people write it: a trailing slash, or no scheme (http, as curl takes it)
RINGMASTER_URL="$URL/" expect_rc 0 "$C" ls
RINGMASTER_URL="${URL#http://}" expect_rc 0 "$C" ls
# and a token never goes in clear text off loopback, however the URL is spelled
for u in ringd.example.invalid:8080 HTTP://ringd.example.invalid:8080 http://127.example.invalid:8080; do
    RINGMASTER_URL=$u expect_rc 2 "$C" ls
    expect_in err "refusing to send RINGMASTER_TOKEN in clear text"
done
expect_rc 1 "$C" submit -n 0 -- x
expect_in err "workers must be in [1"
expect_rc 2 "$C" frobnicate
expect_rc 2 "$C" submit --env NOEQUALS -- x
expect_rc 0 "$C" --version
ok "exit codes: 5 unauthorized, 69 unreachable, 1 refused, 2 usage; tokens with an expiry"

ringd_stop
summary
