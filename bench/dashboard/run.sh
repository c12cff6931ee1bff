#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/dashboard: the dashboard's weight and how fast it shows a ringd with many jobs. A
# ringd (auth on) is given JOBS jobs (1,000 by default: 4 running, the rest queued), then
# headless Chromium loads the dashboard RUNS times cold (a new browser) and warm (the same
# tab again), and bench/dashboard/pageload.py measures the time from navigation to the
# first page of rows painted and to the first contentful paint. The page's weight is every
# asset it loads, uncompressed; the targets are under 300 ms and under 200 KB. Prints a
# table; --json prints one object per cache state.
#
#   bench/dashboard/run.sh [--json] [--jobs N] [--runs N] [--build DIR]
set -euo pipefail
build=build
jobs=1000
runs=7
json=0
while [ $# -gt 0 ]; do
    case $1 in
    --json) json=1 ;;
    --jobs) jobs=$2; shift ;;
    --runs) runs=$2; shift ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--json] [--jobs N] [--runs N] [--build DIR]" >&2; exit 2 ;;
    esac
    shift
done
command -v chromium >/dev/null && command -v chromedriver >/dev/null &&
    /usr/bin/python3 -c 'import selenium' 2>/dev/null ||
    { echo "run.sh: needs chromium, chromium-driver and python3-selenium (contrib/deps.sh)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pid=
cleanup() {
    [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
    [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
    pkill -f "$work/sleep" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Four slots: four jobs run (a sleep, so that the machine stays quiet), the rest wait.
cp /bin/sleep "$work/sleep"
RINGD_SLOTS=4 "$build/server/ringd" --listen 127.0.0.1:0 --data-dir "$work/data" \
    --default-user "$(id -un)" >"$work/ringd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$work/data/ringd.addr" ] && break; sleep 0.05; done
url="http://$(cat "$work/data/ringd.addr")"
token=$(cat "$work/data/admin.token")
echo "bench/dashboard: submitting $jobs jobs" >&2
seq "$jobs" | xargs -P 8 -I{} curl -sf -o /dev/null -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' \
    -d "{\"name\":\"job-{}\",\"command\":[\"$work/sleep\",\"3600\"],\"labels\":{\"team\":\"bench\"}}" \
    "$url/v1/jobs"
n=$(curl -s -H "Authorization: Bearer $token" "$url/metrics" | awk '$1 == "ringd_submissions_total" {print $2}')
echo "bench/dashboard: ringd holds ${n:-?} jobs; $runs cold and $runs warm loads" >&2
rows=$(URL=$url TOKEN=$token RUNS=$runs /usr/bin/python3 "$here/pageload.py")
# Every file the dashboard has (the views a load does not show load on first use).
all=$(cat "$here"/../../server/web/*.{html,js,css,svg} | wc -c)
if [ "$json" = 1 ]; then
    echo "$rows" | jq -c --argjson jobs "$jobs" --argjson all "$all" '. + {jobs: $jobs, all_assets_bytes: $all}'
    exit 0
fi
printf '%-6s %6s %6s %14s %14s %14s %12s %6s\n' cache jobs runs "rows p50 ms" "rows max ms" "paint p50 ms" "page bytes" files
echo "$rows" | jq -r --argjson jobs "$jobs" '[.cache, $jobs, .runs, .first_rows_median_ms, .first_rows_max_ms, .first_paint_median_ms, .page_bytes, .files] | @tsv' |
    while IFS=$'\t' read -r c j r m x f b k; do
        printf '%-6s %6s %6s %14s %14s %14s %12s %6s\n' "$c" "$j" "$r" "$m" "$x" "$f" "$b" "$k"
    done
echo "all of the dashboard's files: $all bytes"
