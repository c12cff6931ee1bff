#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The man pages that help2man made from the programs' --help (contrib/man): each one
# exists, renders, names its program and version, and ringd(8) has the sections that
# --help cannot hold (signals, environment, files).
source "$(dirname "$0")/lib.sh"
: "${RING_MAN_DIR:?RING_MAN_DIR must name contrib/man of the build (ctest sets it)}"
command -v help2man >/dev/null || skip "no help2man (apt-get install help2man): no man pages"
command -v man >/dev/null || skip "no man (apt-get install man-db) to render them"

render() { MANWIDTH=100 man -l "$1" 2>/dev/null | col -b; }
for page in ringd.8 ringctl.1 ringrun.1 ringsim.1; do
    [ -s "$RING_MAN_DIR/$page" ] || fail "no man page $page in $RING_MAN_DIR"
    prog=${page%.*}
    render "$RING_MAN_DIR/$page" >"$WORK/$page.txt"
    grep -q "^NAME" "$WORK/$page.txt" || fail "$page has no NAME"
    grep -q "$prog - " "$WORK/$page.txt" || fail "$page does not name $prog"
    grep -q "$prog 0\.\|$prog [0-9]" "$WORK/$page.txt" || fail "$page has no version"
    grep -q "^SEE ALSO" "$WORK/$page.txt" || fail "$page has no SEE ALSO"
done
ok "ringd(8), ringctl(1), ringrun(1), ringsim(1) render with a name, a version and SEE ALSO"

for section in SIGNALS ENVIRONMENT FILES; do
    grep -q "^$section" "$WORK/ringd.8.txt" || fail "ringd(8) has no $section"
done
grep -q "SIGHUP" "$WORK/ringd.8.txt" || fail "ringd(8) does not say what SIGHUP does"
grep -q "streams_per_token" "$WORK/ringd.8.txt" || fail "ringd(8) lacks the settings of --help"
ok "ringd(8) has SIGNALS (SIGHUP), ENVIRONMENT and FILES besides --help's settings"

summary
