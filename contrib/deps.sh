#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Installs the Debian packages Ringmaster needs to build, test and benchmark.
# Idempotent: packages already present are left alone, and apt-get runs only when
# something is missing. Uses sudo when not run as root.
set -eu

# Build: compiler, CMake, pkg-config; ringd's libraries (libmicrohttpd, Jansson, SQLite,
# libsodium for token hashing, libcurl and libyaml for ringctl). Tests: Check (unit suites), curl (drives
# ringd), iproute2 (network namespaces), procps (pgrep/pkill), jq (checks JSON output),
# python3 (raw HTTP in the hostile-input suite), python3-prometheus-client (its parser checks
# /metrics), python3-jsonschema (the contract tests check the API's responses and JobSpecs
# against api/openapi.json), openssl (certificates for the TLS test), util-linux (setpriv: ringd as another
# user in the isolation test). The service: libsystemd-dev (ringd's sd_notify), libgnutls28-dev
# (ringd hands libmicrohttpd its TLS certificate at each handshake, so a reload can replace
# it), systemd (systemd-analyze checks contrib/systemd/ringd.service), help2man (the man
# pages, from each program's --help).
# bench/: Open MPI (the collectives' peer), libgloo-dev (Gloo, bench/allreduce's other peer;
# build-essential brings its C++ compiler) and wrk (HTTP load). Slurm from Debian: slurmctld,
# slurmd, munge and the client commands for contrib/slurm/testcluster.sh (its srun
# --mpi=pmix needs the mpi_pmix plugin of slurm-wlm-basic-plugins), slurmrestd with its JWT
# plugin as bench/rest's peer; libpmix-dev for libring's PMIx bootstrap (srun --mpi=pmix,
# mpirun) and libslurm-dev for ringd's Slurm backend. Formatting: clang-format. Python bindings
# (worker/python) and their tests: Debian's python3 with numpy, PyTorch 1.13 (python3-torch
# imports only in Debian's /usr/bin/python3), torchvision (bench/torch's resnet18),
# scikit-learn (the digits data set of the PyTorch example), pytest, and setuptools, wheel,
# pip and venv (the packaging test builds the wheel and installs the package offline).
# Packages (make package, tests/integration/install.sh): CPack's DEB generator reads each
# file's type with file(1); dpkg-shlibdeps comes with build-essential (dpkg-dev). Fuzzing (make fuzz): clang with
# libclang-rt-14-dev (libFuzzer and clang's sanitizer runtimes; only a Recommends of clang)
# and llvm (llvm-symbolizer, for readable stacks in its reports). The dashboard's browser
# tests and bench/dashboard: Chromium, its WebDriver (chromium-driver) and Selenium for
# Debian's python3, with a font for the screenshots (fonts-dejavu-core; Chromium only
# recommends fonts, and a fresh machine may have none).
PACKAGES="build-essential cmake pkg-config check
libmicrohttpd-dev libjansson-dev libsqlite3-dev libsodium-dev libcurl4-openssl-dev libyaml-dev curl
libsystemd-dev libgnutls28-dev systemd help2man
iproute2 procps jq python3 python3-prometheus-client python3-jsonschema openssl util-linux
openmpi-bin libopenmpi-dev libgloo-dev wrk
slurmctld slurmd slurm-client munge slurmrestd slurm-wlm-jwt-plugin slurm-wlm-basic-plugins
libpmix-dev libslurm-dev
clang-format clang libclang-rt-14-dev llvm
python3 python3-numpy python3-torch python3-torchvision python3-sklearn python3-pytest
python3-setuptools python3-wheel python3-pip python3-venv file
chromium chromium-driver python3-selenium fonts-dejavu-core"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "deps.sh: missing packages:$missing" >&2
    echo "deps.sh: not root and no sudo; install them as root, then run make again" >&2
    exit 1
fi

echo "deps.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has empty package lists; update before the first install.
$SUDO apt-get update -q
# shellcheck disable=SC2086 # word splitting of the package list is intended
$SUDO apt-get install -y -q --no-install-recommends $missing
