#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What ringd keeps must survive its own failures: the first admin token is never committed
# unless its file was written, a corrupt database is refused at start, and a backup taken
# while jobs are being written is a sound database that a ringd can run on.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${RINGCTL:?}"

DATA=$WORK/data

# call TOKEN METHOD PATH: the status in $WORK/status, the body in $WORK/body
call() {
    curl -s -o "$WORK/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1" "$URL$3" \
        >"$WORK/status"
}
# sql DB QUERY: the first column of each row, through Python's sqlite3 (no sqlite3 CLI in CI)
sql() {
    python3 -c 'import sqlite3, sys
for row in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print(row[0])' "$1" "$2"
}
want() { # want STATUS
    [ "$(cat "$WORK/status")" = "$1" ] || { cat "$WORK/body" >&2; fail "got $(cat "$WORK/status"), want $1"; }
}

# ---- the first admin token: its file first, then its row --------------------------------
# Something in the way of admin.token (here a directory) makes the write fail. ringd must
# say so and store nothing, so that once the way is clear the next start makes a token
# that can be read; committing first would leave a token nobody has, forever.
mkdir -p "$DATA/admin.token/in-the-way"
expect_rc 73 "$RINGD" --listen 127.0.0.1:0 --data-dir "$DATA"
expect_in err "cannot write the first admin token to $(realpath "$DATA")/admin.token"
expect_in err "no token was created"
ls -a "$DATA" | grep -q '^\.admin\.token\.' && fail "a temporary token file was left: $(ls -a "$DATA")"
ok "a failed write of the first admin token exits 73, says what to fix, and leaves nothing"

rm -r "$DATA/admin.token"
ringd_start "$DATA"
[ -f "$DATA/admin.token" ] || fail "the restart made no admin.token; the token of the failed start is lost"
[ "$(stat -c %a "$DATA/admin.token")" = 600 ] || fail "admin.token is $(stat -c %a "$DATA/admin.token"), want 600"
ADMIN=$(cat "$DATA/admin.token")
call "$ADMIN" GET /v1/tokens
want 200
[ "$(jq '[.tokens[] | select(.admin)] | length' "$WORK/body")" = 1 ] ||
    fail "want exactly one admin token, the readable one: $(cat "$WORK/body")"
ls -a "$DATA" | grep -q '^\.admin\.token\.' && fail "a temporary token file was left: $(ls -a "$DATA")"
ok "once it is cleared, the next start writes a usable admin token (0600), the only one"

# ---- a corrupt database is refused at start ----------------------------------------------
curl -s -o /dev/null -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d '{"name":"kept","command":["/bin/true"]}' "$URL/v1/jobs"
ringd_stop
[ ! -s "$DATA/ringd.db-wal" ] || fail "ringd left a WAL after a clean stop"
cp "$DATA/ringd.db" "$WORK/sound.db"
# Garbage over the root page of an index: the kind of damage a torn write leaves.
root=$(sql "$DATA/ringd.db" "SELECT rootpage FROM sqlite_schema WHERE name = 'jobs_state'")
page=$(sql "$DATA/ringd.db" "PRAGMA page_size")
head -c 64 /dev/urandom | dd of="$DATA/ringd.db" bs=1 seek=$(((root - 1) * page)) conv=notrunc 2>/dev/null
expect_rc 65 "$RINGD" --listen 127.0.0.1:0 --data-dir "$DATA"
expect_in err "the job database $(realpath "$DATA")/ringd.db is corrupt (Page $root"
expect_in err "restore the latest backup"
ok "a database with a broken page is refused at start (65), saying so and what to do"
# and one that is no database at all
cp "$WORK/sound.db" "$DATA/ringd.db"
printf 'not a database at all, not at all' | dd of="$DATA/ringd.db" conv=notrunc 2>/dev/null
expect_rc 65 "$RINGD" --listen 127.0.0.1:0 --data-dir "$DATA"
expect_in err "ringd.db is corrupt (file is not a database)"
ok "so is a file that is not a database"
cp "$WORK/sound.db" "$DATA/ringd.db"
ringd_start "$DATA"
call "$ADMIN" GET /v1/jobs
want 200
[ "$(jq '.jobs | length' "$WORK/body")" = 1 ] || fail "the sound copy lost its job: $(cat "$WORK/body")"
ok "the sound copy starts and serves its job"

# ---- an online backup while jobs are being written ----------------------------------------
call "$ADMIN" GET /v1/openapi.json
jq -e '.paths["/v1/admin/backup"].get.responses["200"].content["application/vnd.sqlite3"]' \
    "$WORK/body" >/dev/null || fail "the OpenAPI document lacks GET /v1/admin/backup"
USER_TOKEN=$(curl -s -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d '{"name":"eve"}' "$URL/v1/tokens" | jq -r .token)
call "$USER_TOKEN" GET /v1/admin/backup
want 403
RINGMASTER_URL=$URL RINGMASTER_TOKEN=$USER_TOKEN expect_rc 5 "$RINGCTL" admin backup "$WORK/eve.db"
[ ! -e "$WORK/eve.db" ] || fail "a refused backup left $WORK/eve.db"
ok "backups are for admins only (403; ringctl exits 5 and writes nothing)"

# Submitters keep committing jobs (each with its event) until told to stop; every backup
# taken meanwhile must be one commit's state: sound, no job without its event, and never
# fewer jobs than the one before.
rm -f "$WORK/stop"
submitters=()
for s in 1 2; do
    (
        while [ ! -e "$WORK/stop" ]; do
            curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $ADMIN" \
                -H 'Content-Type: application/json' \
                -d '{"name":"stream","command":["/bin/true"]}' "$URL/v1/jobs"
        done >"$WORK/submit.$s"
    ) &
    submitters+=($!)
done
export RINGMASTER_URL=$URL RINGMASTER_TOKEN=$ADMIN
last=0
for b in $(seq 8); do
    wait_for 30 "more jobs before backup $b" \
        '[ "$(cat "$WORK"/submit.* | wc -l)" -ge $((b * 20)) ]'
    expect_rc 0 "$RINGCTL" admin backup "$WORK/backup.db"
    [ "$(stat -c %a "$WORK/backup.db")" = 600 ] || fail "the backup is $(stat -c %a "$WORK/backup.db"), want 600"
    [ "$(sql "$WORK/backup.db" "PRAGMA integrity_check")" = ok ] || fail "backup $b: $(sql "$WORK/backup.db" "PRAGMA integrity_check")"
    orphans=$(sql "$WORK/backup.db" "SELECT count(*) FROM jobs j WHERE NOT EXISTS
        (SELECT 1 FROM events e WHERE e.job_id = j.id AND e.type = 'submitted')")
    [ "$orphans" = 0 ] || fail "backup $b has $orphans jobs without their submitted event"
    n=$(sql "$WORK/backup.db" "SELECT count(*) FROM jobs")
    [ "$n" -ge "$last" ] || fail "backup $b has $n jobs, fewer than the $last before it"
    last=$n
done
touch "$WORK/stop"
wait "${submitters[@]}"
sort "$WORK"/submit.* | uniq -c | grep -qv ' 201$' && fail "submissions failed during the backups: $(sort "$WORK"/submit.* | uniq -c)"
[ "$last" -gt 1 ] || fail "the last backup has $last jobs"
ls -a "$DATA" | grep -q '^backup-' && fail "a backup's temporary copy was left in the data directory"
ok "8 backups during $(cat "$WORK"/submit.* | wc -l) submissions: each sound (integrity_check), whole, 0600; no submission failed"

# The restore: the backup as the database of another ringd, which serves its jobs.
ringd_stop
JOB=$(sql "$WORK/backup.db" "SELECT id FROM jobs ORDER BY seq DESC LIMIT 1")
mkdir -m 0700 "$WORK/restored"
cp "$WORK/backup.db" "$WORK/restored/ringd.db"
# what a ringd that crashed during a backup leaves, and a file of the admin's
cp "$WORK/backup.db" "$WORK/restored/backup-Ab12Cd"
echo keep >"$WORK/restored/backup-notes.txt"
ringd_start "$WORK/restored"
[ ! -e "$WORK/restored/admin.token" ] || fail "the restored ringd made a new admin token"
[ ! -e "$WORK/restored/backup-Ab12Cd" ] || fail "the copy of a backup cut short was not removed"
[ -e "$WORK/restored/backup-notes.txt" ] || fail "ringd removed a file that was no backup's copy"
served=0 page=
while :; do
    call "$ADMIN" GET "/v1/jobs?page_size=1000${page:+&page_token=$page}"
    want 200
    served=$((served + $(jq '.jobs | length' "$WORK/body")))
    page=$(jq -r '.next_page_token // empty' "$WORK/body")
    [ -n "$page" ] || break
done
[ "$served" = "$last" ] || fail "the restored ringd lists $served jobs, want the backup's $last"
call "$ADMIN" GET "/v1/jobs/$JOB"
want 200
ok "a ringd started on the backup takes the old admin token and serves its $last jobs; stale copies are swept"
ringd_stop

summary
