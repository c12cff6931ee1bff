#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install.sh BUILD: what an admin or a developer meets after the build.
#  1. `cmake --install BUILD --prefix P`, then a program outside the tree built against P
#     through pkg-config's ring.pc (shared and static) and through find_package(Ring)
#     (Ring::ring and Ring::ring_static); each runs an allreduce.
#  2. The Debian packages (cpack), checked for their names, files and Depends, then laid
#     out in a private mount namespace over the build's own prefix, which the binaries were
#     built for: there the installed ringd starts, finds the installed ringd-exec, serves
#     /healthz and runs a job built against the installed ring.pc through the installed
#     ringrun; the installed Python package runs an allreduce on the installed libring.so.
# Root only for the second half (mount namespace); in CI nothing may skip.
. "$(dirname "$0")/lib.sh"
BUILD=${1:?usage: install.sh BUILD}
HERE=$(cd "$(dirname "$0")" && pwd)
# The installed ringd's responses are not the contract test's (and it may run concurrently).
unset RING_CONTRACT_RECORDS RINGD_RECORD_RESPONSES

if [ "${INSTALL_TEST_INSIDE:-}" = 1 ]; then
    # -- 2b, inside the namespace: the packages' files lie over $PREFIX ------------------
    : "${PREFIX:?}" "${LIBDIR:?}" "${OUTSIDE:?}" "${ROOT:?}" "${EXEC_PATH:?}"
    passed=${PASSED_OUTSIDE:-0}
    export PATH=$PREFIX/bin:$PATH
    [ "$(command -v ringd)" = "$PREFIX/bin/ringd" ] || fail "ringd on PATH is $(command -v ringd)"
    # The loader finds libring.so.0 through ld.so.cache, as after the package's ldconfig.
    ldconfig -X -C "$OUTSIDE/ld.so.cache" && mount --bind "$OUTSIDE/ld.so.cache" /etc/ld.so.cache
    ldconfig -p >"$WORK/ldconfig" # not into grep -q, whose early exit would fail the pipe
    grep -q "libring.so.0 .*=> $PREFIX/$LIBDIR/libring.so.0" "$WORK/ldconfig" ||
        fail "ldconfig does not see the installed libring.so.0"

    # shellcheck disable=SC2046 # pkg-config's output is words, to be split
    expect_rc 0 cc -o "$OUTSIDE/job" "$HERE/install/consumer.c" $(pkg-config --cflags --libs ring)
    ok "a program builds against the installed ring.pc"

    RINGD=$PREFIX/bin/ringd
    [ ! -e "$PREFIX/bin/ringd-exec" ] || fail "ringd-exec was installed next to ringd"
    ringd_start "$WORK/data" --no-auth
    exec_line=$(grep -o 'ringd-exec /[^ ,"]*' "$WORK/ringd.log" | tail -1)
    [ "$exec_line" = "ringd-exec $EXEC_PATH" ] ||
        { cat "$WORK/ringd.log"; fail "ringd uses '$exec_line', want the installed $EXEC_PATH"; }
    grep -q "ringrun $PREFIX/bin/ringrun" "$WORK/ringd.log" ||
        { cat "$WORK/ringd.log"; fail "ringd does not use the installed ringrun"; }
    code=$(curl -s -o "$WORK/health" -w '%{http_code}' "$URL/healthz")
    [ "$code" = 200 ] || { cat "$WORK/health"; fail "/healthz answered $code"; }
    ok "the installed ringd starts with the installed ringd-exec and ringrun, and serves /healthz"

    id=$(curl -s -H 'Content-Type: application/json' \
        -d "{\"name\":\"installed\",\"command\":[\"$OUTSIDE/job\"],\"workers\":1}" "$URL/v1/jobs" | jq -r .id)
    [ -n "$id" ] && [ "$id" != null ] || fail "the job was not accepted"
    wait_for 60 "the job to finish" \
        '[[ "$(curl -s "$URL/v1/jobs/$id" | jq -r .state)" =~ ^(SUCCEEDED|FAILED|CANCELLED)$ ]]'
    curl -s "$URL/v1/jobs/$id" >"$WORK/job.json"
    run=$(jq -r '.attempts[0].run_dir' "$WORK/job.json")
    jq -e '.state == "SUCCEEDED"' "$WORK/job.json" >/dev/null ||
        { jq . "$WORK/job.json"; cat "$run"/ringrun.log "$run"/rank.0/stderr 2>/dev/null; fail "job $id failed"; }
    grep -q "consumer: ok (libring .*, 1 rank)" "$run/rank.0/stdout" || fail "no result in $run/rank.0/stdout"
    ringd_stop
    ok "the installed ringd runs a one-rank job through ringd-exec and ringrun"

    # Without its ringd-exec, or with one that others may change, ringd does not start
    # (64: a configuration error), and says where it looked and what to fix.
    exec_dir=$(dirname "$EXEC_PATH")
    mount -t tmpfs -o mode=0755 tmpfs "$exec_dir"
    expect_rc 64 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/data2" --no-auth
    expect_in err "cannot find ringd-exec at $EXEC_PATH"
    install -m 0777 "$ROOT$EXEC_PATH" "$EXEC_PATH"
    expect_rc 64 "$RINGD" --listen 127.0.0.1:0 --data-dir "$WORK/data2" --no-auth
    expect_in err "ringd-exec $EXEC_PATH may be changed by others than root"
    umount "$exec_dir"
    ok "the installed ringd refuses a missing or world-writable ringd-exec, naming it"

    if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
        out=$(cd / && env -u PYTHONPATH -u RING_LIBRARY /usr/bin/python3 -c "import numpy, ringmaster as rm; rm.init(); \
print(rm.library_path, rm.allreduce(numpy.ones(2), op=rm.Sum).tolist())")
        [ "$out" = "$PREFIX/$LIBDIR/libring.so.0 [1.0, 1.0]" ] || fail "python3-ringmaster printed '$out'"
        ok "the installed Python package runs an allreduce on the installed libring.so.0"
    else
        skip "Debian's python3 lacks numpy (contrib/deps.sh)"
    fi
    summary
    exit 0
fi

for tool in cmake cc pkg-config; do
    command -v $tool >/dev/null || skip "$tool is not installed (contrib/deps.sh)"
done
BUILD=$(cd "$BUILD" && pwd)
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }

# -- 1. cmake --install into a prefix of our own ----------------------------------------
X=$WORK/x
expect_rc 0 cmake --install "$BUILD" --prefix "$X"
pc=$(find "$X" -name ring.pc)
[ -n "$pc" ] || fail "no ring.pc under $X"
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
libdir=$(pkg-config --variable=libdir ring)
[ "$libdir" = "$X/$(cache CMAKE_INSTALL_LIBDIR)" ] || fail "ring.pc's libdir is $libdir, not under $X"
for f in bin/ringrun bin/ringd bin/ringctl bin/ringsim include/ring.h; do
    [ -e "$X/$f" ] || fail "cmake --install did not install $f"
done
[ -x "$X/$(cache CMAKE_INSTALL_LIBEXECDIR)/ringmaster/ringd-exec" ] || fail "no libexec/ringmaster/ringd-exec"
[ -e "$libdir/libring.a" ] && [ -e "$libdir/libring.so" ] || fail "libring.a or libring.so missing"
[ "$(readlink "$libdir/libring.so.0")" = "libring.so.$(cache CMAKE_PROJECT_VERSION)" ] ||
    fail "libring.so.0 does not name the versioned library"
ok "cmake --install lays out libring (shared, static), ring.h, the tools, ringd and libexec/ringmaster/ringd-exec"

# needs FILE LIB: FILE's dynamic section names LIB (NEEDED).
needs() { local d; d=$(readelf -d "$1") && grep -q "NEEDED.*\[$2" <<<"$d"; }
cd "$WORK" || exit 1
# shellcheck disable=SC2046 # pkg-config's output is words, to be split
expect_rc 0 cc -o pc_shared "$HERE/install/consumer.c" $(pkg-config --cflags --libs ring) -Wl,-rpath,"$libdir"
expect_rc 0 ./pc_shared
expect_in out "consumer: ok"
needs pc_shared 'libring.so.0' || fail "pc_shared does not need libring.so.0"
libs=$(pkg-config --static --libs ring)
# shellcheck disable=SC2046,SC2086 # pkg-config's output is words, to be split
expect_rc 0 cc -o pc_static "$HERE/install/consumer.c" $(pkg-config --cflags ring) "$libdir/libring.a" ${libs/-lring /}
expect_rc 0 ./pc_static
expect_in out "consumer: ok"
! needs pc_static libring || fail "pc_static needs libring.so"
ok "pkg-config --cflags --libs ring (and --static) build programs that run an allreduce"

expect_rc 0 cmake -S "$HERE/install" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$X"
expect_rc 0 cmake --build "$WORK/consumer"
for kind in shared static; do
    expect_rc 0 "$WORK/consumer/consumer_$kind"
    expect_in out "consumer: ok"
done
! needs "$WORK/consumer/consumer_static" libring || fail "Ring::ring_static needs libring.so"
ok "find_package(Ring): Ring::ring and Ring::ring_static build programs that run an allreduce"

# -- 2. the Debian packages -------------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "the packages' half needs root (a mount namespace)"
for tool in cpack dpkg-deb dpkg-shlibdeps unshare curl jq; do
    command -v $tool >/dev/null || skip "$tool is not installed (contrib/deps.sh)"
done
expect_rc 0 cpack --config "$BUILD/CPackConfig.cmake" -B "$WORK/cpack"
ver="$(cache CMAKE_PROJECT_VERSION)-1"
deb() { ls "$WORK"/cpack/"$1"_"$ver"_*.deb 2>/dev/null; }
has() { local in; in=$(cat); grep -qF -- "$1" <<<"$in"; } # reads all: no SIGPIPE to fail the pipe
for p in libring0 libring-dev ringmaster-tools ringmaster-daemon python3-ringmaster; do
    [ -n "$(deb $p)" ] || { ls "$WORK/cpack" >&2; fail "cpack made no $p package"; }
    dpkg-deb -c "$(deb $p)" | has "/share/doc/$p/copyright" || fail "$p has no copyright file"
done
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
field libring-dev Depends | has "libring0 (= $ver)" || fail "libring-dev does not depend on libring0 (= $ver)"
field libring0 Depends | has "libsodium" || fail "libring0's Depends lack libsodium: $(field libring0 Depends)"
field ringmaster-daemon Depends | has "libmicrohttpd" || fail "ringmaster-daemon's Depends lack libmicrohttpd"
field ringmaster-daemon Depends | has "ringmaster-tools (= $ver)" || fail "ringmaster-daemon does not depend on the tools"
field python3-ringmaster Depends | has "libring0 (= $ver)" || fail "python3-ringmaster does not depend on libring0"
# The service's files, where the tree has them (cmake/RingInstallService.cmake).
SRC=$HERE/../..
if [ -f "$SRC/contrib/systemd/ringd.service" ]; then
    dpkg-deb -c "$(deb ringmaster-daemon)" | has "/lib/systemd/system/ringd.service" ||
        fail "ringmaster-daemon lacks the unit"
fi
if [ -f "$SRC/contrib/ringd.conf" ]; then
    dpkg-deb -c "$(deb ringmaster-daemon)" | has "/etc/ringmaster/ringd.conf" ||
        fail "ringmaster-daemon lacks ringd.conf"
    dpkg-deb -I "$(deb ringmaster-daemon)" conffiles | has "/etc/ringmaster/ringd.conf" ||
        fail "ringd.conf is not a conffile of ringmaster-daemon"
fi
for tool in ringctl ringrun; do
    [ ! -f "$SRC/contrib/completion/$tool" ] || dpkg-deb -c "$(deb ringmaster-tools)" |
        has "/bash-completion/completions/$tool" || fail "ringmaster-tools lacks $tool's completion"
done
dpkg-deb -c "$(deb libring0)" | has "/libring.so.0 -> libring.so.$(cache CMAKE_PROJECT_VERSION)" || fail "libring0 lacks libring.so.0"
# What apt would do with them on this host, which has every dependency: install all five,
# nothing missing, nothing in conflict (it fails on an unmet Depends).
command -v apt-get >/dev/null || skip "apt-get is not installed"
expect_rc 0 apt-get install --simulate --no-download -q "$WORK"/cpack/*.deb
[ "$(grep -c '^Inst ' "$WORK/out")" = 5 ] || { cat "$WORK/out"; fail "apt would not install the 5 packages"; }
ok "cpack builds libring0, libring-dev, ringmaster-tools, ringmaster-daemon and python3-ringmaster, installable here"

PREFIX=$(cache CMAKE_INSTALL_PREFIX)
LIBDIR=$(cache CMAKE_INSTALL_LIBDIR)
[ -d "$PREFIX" ] || skip "the build's prefix $PREFIX does not exist on this host to lay the packages over"
ROOT=$WORK/root
for f in "$WORK"/cpack/*.deb; do dpkg-deb -x "$f" "$ROOT"; done
# A read-only overlay: the packages' files over the host's $PREFIX, seen only in the
# namespace. ringd-exec's directories are root's and 0755 there, as ringd requires.
mkdir -p "$WORK/outside" && chmod 0711 "$WORK" && chmod 0755 "$WORK/outside"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || skip "no overlay file system here"
EXEC_PATH=$PREFIX/$(cache CMAKE_INSTALL_LIBEXECDIR)/ringmaster/ringd-exec
export PREFIX LIBDIR ROOT EXEC_PATH OUTSIDE=$WORK/outside INSTALL_TEST_INSIDE=1 PASSED_OUTSIDE=$passed
rc=0
unshare -m --propagation private -- bash -c '
    mount -t overlay overlay -o "lowerdir=$1$PREFIX:$PREFIX" "$PREFIX" || exit 3
    exec bash "$2" "$3"' inside "$ROOT" "$0" "$BUILD" || rc=$?
[ "$rc" != 77 ] || exit 77 # skipped inside (never in CI: skip fails there)
[ "$rc" != 3 ] || skip "cannot mount an overlay over $PREFIX in a mount namespace here"
[ "$rc" = 0 ] || fail "the packages did not work installed (above)"
