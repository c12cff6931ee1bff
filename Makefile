# SPDX-License-Identifier: Apache-2.0
#
# The thin front door. Plain `make` configures with CMake into build/ and builds; it
# installs nothing on the system. `make run` and `make test` are all a newcomer needs on a
# fresh Debian 12 machine: both first install the Debian packages that are missing
# (contrib/deps.sh, which `make deps` runs alone). Everything else is in CMakeLists.txt.

BUILD ?= build
PKG_BUILD ?= build-deb
MAKEFLAGS += --no-print-directory
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1

.PHONY: all deps configure build run test bench fuzz package format clean

all: build

deps:
	@sh contrib/deps.sh

configure:
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null || \
		{ echo "make: configure failed; 'make deps' installs the Debian packages it needs" >&2; exit 1; }

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Starts ringd on 127.0.0.1:8080 (data in ./var), submits the example trainer through the
# API, follows it, then serves until Ctrl-C.
run: deps
	@$(MAKE) build
	@contrib/run.sh $(BUILD)

test: deps
	@$(MAKE) build
	@cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(JOBS)

bench: deps
	@$(MAKE) build
	@bench/allreduce/run.sh --build $(BUILD)
	@bench/allreduce/hosts.sh --build $(BUILD)
	@bench/engine/run.sh --build $(BUILD)
	@bench/mpi_backend/run.sh --build $(BUILD)
	@bench/torch/run.sh --build $(BUILD)
	@bench/rest/run.sh --build $(BUILD)
	@bench/slurm/run.sh --build $(BUILD)
	@bench/dashboard/run.sh --build $(BUILD)
	@$(BUILD)/bench/sched/bench_sched

# The libFuzzer harnesses (tests/fuzz/), built by clang with ASan and UBSan in their own
# folder, each run for FUZZ_SECONDS (FUZZ_JOBS at a time). Prints executions per harness;
# fails when one crashed, leaving the input in build-fuzz/tests/fuzz/crashes/.
fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DRING_FUZZ=ON -DRING_SANITIZE=address,undefined \
		$(CMAKE_FLAGS) >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzzers
	@FUZZ_JOBS=$(FUZZ_JOBS) tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

# The Debian packages (cmake/RingPackage.cmake) in $(PKG_BUILD)/: a build of their own
# for /usr, where ringd looks for ringd-exec, without the tests.
package:
	@cmake -S . -B $(PKG_BUILD) -DCMAKE_INSTALL_PREFIX=/usr -DBUILD_TESTING=OFF $(CMAKE_FLAGS) \
		>/dev/null
	@cmake --build $(PKG_BUILD) -j $(JOBS)
	@cd $(PKG_BUILD) && cpack
	@ls $(PKG_BUILD)/*.deb

format:
	@find common worker tests bench server api db scheduler -name '*.[ch]' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(PKG_BUILD) build-asan build-fuzz build-tsan
