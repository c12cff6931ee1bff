#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The record the contract test reads (server/record.h): with RINGD_RECORD_RESPONSES, ringd
# appends one JSON line per response, whatever the request; a record it cannot open stops it
# from starting, rather than leaving the contract test with a silent gap.
. "$(dirname "$0")/../integration/lib.sh"
: "${RINGD:?}"
unset RING_CONTRACT_RECORDS RINGD_RECORD_RESPONSES
RAW=$(dirname "$0")/../integration/rawhttp.py

expect_rc 64 env RINGD_RECORD_RESPONSES="$WORK/no/such/dir/r.jsonl" "$RINGD" --listen 127.0.0.1:0 \
    --data-dir "$WORK/d0" --no-auth
expect_in err "cannot open RINGD_RECORD_RESPONSES=$WORK/no/such/dir/r.jsonl"
ok "a record ringd cannot open stops it, naming the variable (64)"

REC=$WORK/r.jsonl
RINGD_RECORD_RESPONSES=$REC ringd_start "$WORK/data" --no-auth
[ "$(stat -c %a "$REC")" = 600 ] || fail "the record is $(stat -c %a "$REC"), not 0600: it holds tokens"
curl -s -o /dev/null "$URL/v1/cluster"
curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -d '{"name":"r","command":[]}' "$URL/v1/jobs"
curl -s -o /dev/null "$URL/metrics"
# A target that is not UTF-8 (the edge refuses it): the record stays JSON.
printf 'GET /v1/jobs/\\xff\\xfe HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' |
    /usr/bin/python3 "$RAW" "$ADDR" >/dev/null
ringd_stop
jq -e -s '
    length == 4 and
    (.[0] | .method == "GET" and .target == "/v1/cluster" and .status == 200 and .kind == "json"
        and .content_type == "application/json" and (.body.nodes | length) == 1) and
    (.[1] | .status == 422 and .content_type == "application/problem+json"
        and .body.type == "urn:ringmaster:problem:validation-error") and
    (.[2] | .status == 200 and .kind == "text" and (.content_type | startswith("text/plain"))) and
    (.[3] | .status == 400 and .kind == "json")' "$REC" >/dev/null ||
    { cat "$REC" >&2; fail "the record is not one line per response with its status, type and body"; }
ok "every response is one JSON line: method, target, status, Content-Type and body"
summary
