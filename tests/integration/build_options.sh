#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build_options.sh: the configure switches of the top-level CMakeLists.txt, each checked in
# a configure of its own (no build: the generated link lines say what would be linked).
#  - RING_SERVICE=OFF configures where pkg-config sees only libring's libraries (libsodium,
#    PMIx), with no ringd, ringd-exec, ringctl or ringsim, and links ringrun and libring
#    with none of the service's libraries; the same view with the service on fails, naming
#    what is missing (so the view does hide them).
#  - BUILD_TESTING=OFF configures no test.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
command -v cmake >/dev/null && command -v pkg-config >/dev/null || skip "needs cmake and pkg-config"

# A pkg-config that sees libring's own libraries only.
mkdir -p "$WORK/pc"
for m in libsodium pmix; do
    dir=$(pkg-config --variable=pcfiledir "$m" 2>/dev/null) || continue
    ln -s "$dir/$m.pc" "$WORK/pc/$m.pc"
done
[ -e "$WORK/pc/libsodium.pc" ] || skip "libsodium's pkg-config file is not installed (contrib/deps.sh)"

# The options that probe for what the test does not look at are off, to keep it short.
quick=(-DRING_WITH_CUDA=OFF -DRING_WITH_MPI=OFF)
expect_rc 0 env PKG_CONFIG_LIBDIR="$WORK/pc" cmake -S "$SRC" -B "$WORK/lite" -DRING_SERVICE=OFF "${quick[@]}"
expect_in out "RING_SERVICE=OFF: no tests or benchmarks"
cmake --build "$WORK/lite" --target help >"$WORK/targets"
for t in ring ring_static ringrun; do
    grep -qx "\.\.\. $t" "$WORK/targets" || { cat "$WORK/targets"; fail "RING_SERVICE=OFF has no $t"; }
done
for t in ringd ringd-exec ringctl ringsim ringd_db; do
    ! grep -qx "\.\.\. $t" "$WORK/targets" || fail "RING_SERVICE=OFF still builds $t"
done
for f in "$WORK"/lite/worker/ringrun/CMakeFiles/ringrun.dir/link.txt \
         "$WORK"/lite/worker/libring/CMakeFiles/ring.dir/link.txt; do
    [ -f "$f" ] || fail "no link line at $f"
    ! grep -Eq 'microhttpd|jansson|sqlite|slurm|curl|yaml|ringd' "$f" ||
        { cat "$f"; fail "$f links a library of the service"; }
done
ok "RING_SERVICE=OFF configures with libsodium alone and links ringrun and libring with nothing of the service"

expect_rc 1 env PKG_CONFIG_LIBDIR="$WORK/pc" cmake -S "$SRC" -B "$WORK/full" "${quick[@]}"
expect_in out "libmicrohttpd"
ok "the service on, with the same pkg-config, fails naming libmicrohttpd"

expect_rc 0 cmake -S "$SRC" -B "$WORK/notests" -DBUILD_TESTING=OFF "${quick[@]}"
[ ! -e "$WORK/notests/tests" ] && [ ! -e "$WORK/notests/bench" ] ||
    fail "BUILD_TESTING=OFF still configures tests/ or bench/"
cmake --build "$WORK/notests" --target help >"$WORK/targets"
grep -qx "\.\.\. ringd" "$WORK/targets" || fail "BUILD_TESTING=OFF lost ringd"
! grep -qx "\.\.\. test_api" "$WORK/targets" || fail "BUILD_TESTING=OFF still builds the unit tests"
ok "BUILD_TESTING=OFF configures the programs and no test"
summary
