#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# make run: starts ringd on 127.0.0.1:8080 in dev mode (no auth, loopback only, data in
# ./var), submits the example trainer through the REST API, follows it to the end, then
# keeps serving until Ctrl-C.
set -euo pipefail
build=${1:-build}
data=var
listen=127.0.0.1:8080
train=$(realpath "$build/worker/examples/train")

mkdir -p "$data"
rm -f "$data/ringd.addr"
# 4 slots, so the example runs 4 workers even on a 2-core machine (oversubscribed, fine here).
# Jobs run as you (under sudo, as the user who called sudo), never as ringd itself.
user=${SUDO_USER:-$(id -un)}
RINGD_SLOTS=${RINGD_SLOTS:-4} "$build/server/ringd" --listen "$listen" --data-dir "$data" \
    --no-auth --default-user "$user" >>"$data/ringd.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true; echo; echo "ringd stopped."' EXIT
for _ in $(seq 100); do
    [ -s "$data/ringd.addr" ] && break
    kill -0 $pid 2>/dev/null || { tail -5 "$data/ringd.log"; exit 1; }
    sleep 0.05
done
url="http://$(cat "$data/ringd.addr")"
echo "ringd is serving $url (log: $data/ringd.log)"

spec=$(printf '{"name":"example","command":["%s","--epochs","10","--step-sleep-ms","1"],"workers":{"min":1,"max":4},"labels":{"from":"make-run"}}' "$train")
job=$(curl -sf -H 'Content-Type: application/json' -d "$spec" "$url/v1/jobs" | jq -r .id)
echo "submitted the example trainer as job $job; following it:"
shown=0
while :; do
    state=$(curl -sf "$url/v1/jobs/$job" | jq -r .state)
    run=$(curl -sf "$url/v1/jobs/$job" | jq -r '.attempts[-1].run_dir // empty')
    if [ -n "$run" ] && [ -f "$run/rank.0/stdout" ]; then
        lines=$(wc -l <"$run/rank.0/stdout")
        if [ "$lines" -gt "$shown" ]; then
            tail -n +"$((shown + 1))" "$run/rank.0/stdout" | head -n "$((lines - shown))" | sed 's/^/  /'
            shown=$lines
        fi
    fi
    case $state in SUCCEEDED | FAILED | CANCELLED | STOPPED) break ;; esac
    sleep 0.5
done
echo "job $job: $state"
cat <<EOT

ringd keeps serving until Ctrl-C. Open the dashboard at $url/ (no token: auth is off), or try:
  curl -s $url/v1/jobs | jq .
  curl -s $url/v1/jobs/$job | jq '{state, attempts, progress}'
  curl -s -H 'Content-Type: application/json' \\
       -d '{"name":"again","command":["$train","--epochs","3"],"workers":2}' $url/v1/jobs
  curl -s -X POST $url/v1/jobs/<id>/cancel
  curl -s $url/v1/openapi.json | jq '.paths | keys'
EOT
wait $pid
