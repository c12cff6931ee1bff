#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What ringd keeps must survive its own failures: the first admin token is never committed
# unless its file was written, and a corrupt database is refused at start.
source "$(dirname "$0")/lib.sh"
: "${RINGD:?}"

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
ringd_stop

summary
