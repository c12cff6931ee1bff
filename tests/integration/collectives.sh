#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every collective x dtype x op at one world size: collectives.sh NP
. "$(dirname "$0")/lib.sh"
: "${COLL_CHECK:?}"
np=$1
expect_rc 0 "$RINGRUN" -np "$np" --timeout 60 "$COLL_CHECK"
expect_in out "checks passed at np $np"
cat "$WORK/out"
ok "collectives at np $np"
summary
