#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dashboard ringd serves at /, in a real browser (headless Chromium, driven by Selenium
# from dashboard.py) against a real ringd with auth on and the dynamic policy, running the
# example trainer: sign-in (a bad token gets a clear message), the jobs table kept live by
# the event stream, a resize by the dynamic policy on a job's size chart, Cancel from a
# job's page, the cluster and scheduler pages. Screenshots go to $RING_ARTIFACTS (the build
# tree); RING_DASHBOARD_SHOT=PATH also copies the job page's there (docs/dashboard.png).
# Before the browser, the assets' headers: the strict Content-Security-Policy and the rest.
. "$(dirname "$0")/lib.sh"
: "${RINGD:?}" "${TRAIN:?}"

python=/usr/bin/python3 # Debian's, which has python3-selenium
command -v chromium >/dev/null || skip "no chromium (contrib/deps.sh installs it)"
command -v chromedriver >/dev/null || skip "no chromedriver (contrib/deps.sh installs chromium-driver)"
"$python" -c 'import selenium' 2>/dev/null || skip "no python3-selenium (contrib/deps.sh installs it)"

cat >"$WORK/ringd.conf" <<CONF
policy = dynamic
slots = 4
# GPUs by number: the trainer runs on CPUs and ignores CUDA_VISIBLE_DEVICES, but the
# cluster page has GPUs to show who holds.
gpus = 4
sched_interval = 2
restart_cost = 1
hysteresis = 2
CONF
ringd_start "$WORK/data" --config "$WORK/ringd.conf"
on_exit() {
    local rc=$?
    [ "$rc" = 0 ] || grep -v msg=request "$WORK/ringd.log" | tail -30 >&2 || true
    pkill -9 -f "$WORK" 2>/dev/null || true
    lib_exit
}
trap on_exit EXIT

curl -sD "$WORK/headers" -o "$WORK/index.html" "$URL/"
for h in "content-security-policy: default-src 'self'; script-src 'self'; style-src 'self'" \
    "frame-ancestors 'none'" "x-content-type-options: nosniff" "referrer-policy: no-referrer" \
    "content-type: text/html"; do
    tr 'A-Z' 'a-z' <"$WORK/headers" | grep -qF -- "$(echo "$h" | tr 'A-Z' 'a-z')" ||
        { cat "$WORK/headers"; fail "GET / lacks '$h'"; }
done
grep -q '<script type="module" src="/ui/app.js">' "$WORK/index.html" || fail "no /ui/app.js in the page"
if grep -qiE '<script>|<style|[[:space:]]style=|[[:space:]]on[a-z]+=' "$WORK/index.html"; then
    fail "the page has inline script or style, which its CSP forbids"
fi
code=$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $(sed -n 's/^ETag: //Ip' "$WORK/headers" | tr -d '\r')" "$URL/")
[ "$code" = 304 ] || fail "GET / with its ETag gave $code, not 304"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/ui/app.js")
[ "$code" = 405 ] || fail "POST /ui/app.js gave $code, not 405"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/ui/nothing.js")
[ "$code" = 404 ] || fail "GET /ui/nothing.js gave $code, not 404"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/jobs")
[ "$code" = 401 ] || fail "the API without a token gave $code, not 401"
ok "the dashboard's assets: no token needed (the API still wants one), strict CSP, nosniff, no Referer, 304 on its ETag"

shots=${RING_ARTIFACTS:-$WORK/artifacts}/dashboard
mkdir -p "$shots"
URL=$URL TOKEN=$(cat "$WORK/data/admin.token") TRAIN=$TRAIN SHOTS=$shots PASSED=$passed "$python" "$(dirname "$0")/dashboard.py"
echo "screenshots: $shots"
if [ -n "${RING_DASHBOARD_SHOT:-}" ]; then
    cp "$shots/job-top.png" "$RING_DASHBOARD_SHOT"
fi
