#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs one pytest suite for ctest: run.sh NP FILE [PYTEST ARGS...]. NP 0 runs pytest as one
# plain process; otherwise every one of NP ranks that $RINGRUN starts runs the suite.
# Exits 77 (ctest's skip) when Debian's python3 lacks numpy, pytest or (for the torch
# suites) torch: contrib/deps.sh installs them. The REST client's suite needs pytest only.
set -euo pipefail
np=$1 file=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # Debian's python3-torch imports only in Debian's own python3
need="numpy, pytest"
case $file in
test_client*) need="pytest" ;;
*torch* | *examples*)
    need="$need, torch, sklearn"
    if [ -n "${RING_TEST_NO_TORCH:-}" ]; then
        echo "SKIP: torch aborts on its own C++ exceptions under the AddressSanitizer runtime that an"
        echo "instrumented libring.so needs preloaded; the plain build runs this suite"
        exit 77
    fi ;;
esac
if ! "$py" -c "import $need" 2>/dev/null; then
    echo "SKIP: $py cannot import $need (run contrib/deps.sh)"
    exit 77
fi
: "${RINGRUN:?RINGRUN must name the ringrun binary (ctest sets it)}"
: "${RING_LIBRARY:?RING_LIBRARY must name the build libring.so (ctest sets it)}"
export PYTHONPATH=$here/../../worker/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
# A rank that fails before a collective must not leave the others waiting for it.
export RING_STALL_SHUTDOWN_SECONDS=${RING_STALL_SHUTDOWN_SECONDS:-30}
if [ -n "${RING_TEST_PRELOAD:-}" ]; then
    # A sanitizer build of libring.so needs its runtime loaded first; Python itself is
    # not instrumented, so its own allocations are not checked for leaks.
    export LD_PRELOAD=$RING_TEST_PRELOAD
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
fi
cd "$here"
args=(-m pytest -q -p no:cacheprovider -p no:hypothesispytest "$file" "$@")
if [ "$np" = 0 ]; then
    exec "$py" "${args[@]}"
fi
exec "$RINGRUN" -np "$np" "$py" "${args[@]}"
