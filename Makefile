# boostcomm: the two commands are
#   make demo   install missing Debian packages and the Python environment (.venv,
#               torch 2.13.0 CPU), build, replay ResNet-50 training on 2 ranks
#               (baseline / fused / boosted before-after table, and its chart)
#   make test   the same set-up, build, run every test (ctest)
# `make help` lists the rest. Variables below can be overridden:
#   make test BUILD_TYPE=Debug CTEST_ARGS='-R mpi'
#   make demo NP=4 DEMO_ARGS='replay --model bert-large --comm-share 0.38 --steps 3'
#   make bench BENCH_ARGS='bench -c allgather -b 1K -e 64M'
#   make install PREFIX=$HOME/.local

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
# cmake's generated makefiles recurse; the directory chatter only hides errors.
MAKEFLAGS += --no-print-directory

BUILD_DIR  ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX     ?= /usr/local
NP         ?= 2
CMAKE_ARGS ?=
# Parallel: each MPI test declares PROCESSORS = its rank count, so ctest
# never runs a busy-polling MPI job beside another test on too few cores.
CTEST_JOBS ?= $(JOBS)
# The 3-rank entry of torch's suite is outside the default set (CI time): CTEST_ARGS= runs it too.
CTEST_ARGS ?= -LE torchsuite_ws3
# Default per-test limit (tests that set TIMEOUT keep theirs): a deadlocked
# MPI test fails in minutes instead of eating the CI budget.
CTEST_TIMEOUT ?= 300
# SKIP_DEPS=1 skips the Debian package check and the virtual environment
# (other distributions, no network: pass PYTHON=an interpreter with torch).
SKIP_DEPS  ?= 0
# The project's Python environment (scripts/make_venv.sh, python/requirements.txt):
# the interpreter the Python module and torch backend are built for and tested with.
VENV       ?= .venv

BOOSTCOMM_CLI := $(BUILD_DIR)/tools/boostcomm
DEMO_JSON     := $(BUILD_DIR)/demo_replay.json
DEMO_ARGS     ?= replay --model resnet50 --comm-share 0.28 --steps 5 --output $(DEMO_JSON)
DEMO_PNG      := $(BUILD_DIR)/demo_replay.png
# With SKIP_DEPS=1 and no environment made, python3 on PATH (say so: without
# torch the backend and its tests are not built).
PYTHON        ?= $(if $(or $(filter 0,$(SKIP_DEPS)),$(wildcard $(VENV)/bin/python)),$(abspath $(VENV))/bin/python,$(shell command -v python3))
# The package from the source tree, as plotting reads JSON only (matplotlib from the environment).
PLOT          := PYTHONPATH=python $(PYTHON) -m boostcomm.plot
BENCH_JSON    := $(BUILD_DIR)/demo_bench.json
BENCH_ARGS    ?= bench -b 8 -e 16M -f 4 -c allreduce -d float32 -o sum -n 20 -w 5 --output $(BENCH_JSON)

# Root, oversubscription, no binding, and the CMA fallback for containers
# (see the script). Exported here too so plain `mpirun` in recipes and the
# mpiexec that ctest starts for MPI tests behave the same.
MPI_ENV := source scripts/mpirun_local.sh
export OMPI_ALLOW_RUN_AS_ROOT ?= 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM ?= 1

.PHONY: help deps configure build test demo bench plots install install-check clean asan ubsan asan-ubsan tsan torch-check torchsuite-gloo

help:
	@echo "make demo           deps + build + 2-rank 'boostcomm replay' of ResNet-50 (JSON in $(DEMO_JSON), chart $(DEMO_PNG))"
	@echo "make bench          deps + build + 2-rank 'boostcomm bench' allreduce sweep (JSON in $(BENCH_JSON))"
	@echo "make plots          deps + build + runs on this machine, charts into docs/img/ (docs/PLOTS.md)"
	@echo "make test           deps + build + ctest (unit, MPI and large-count tests)"
	@echo "make build          deps + configure + compile into $(BUILD_DIR)/ (the default goal)"
	@echo "make install        install to PREFIX=$(PREFIX)"
	@echo "make install-check  install to a temporary prefix and build examples/consumer against it;"
	@echo "                    pip install . into a fresh environment and run a torchrun job on it"
	@echo "make deps           only install missing Debian packages and the Python environment $(VENV)"
	@echo "make torch-check    the torch backend's tests on torch 2.14.1 (a second environment, .venv-torch-check: ~5.5 GB)"
	@echo "make torchsuite-gloo  re-record which of torch's DistributedTest tests pass on gloo (tests/torchsuite/gloo_passes.txt)"
	@echo "make asan|ubsan|asan-ubsan|tsan  sanitizer build in build-asan/ (build-ubsan/, ...), then its unit + MPI suites"
	@echo "make clean          remove $(BUILD_DIR)/"
	@echo "variables: BUILD_DIR BUILD_TYPE JOBS CTEST_JOBS NP PREFIX CMAKE_ARGS CTEST_ARGS CTEST_TIMEOUT DEMO_ARGS BENCH_ARGS SKIP_DEPS VENV PYTHON SAN_CTEST_ARGS SAN_TARGETS"

deps:
ifeq ($(SKIP_DEPS),1)
	@echo "deps: skipped (SKIP_DEPS=1)"
else
	@scripts/install_deps.sh
	@scripts/make_venv.sh $(VENV)
endif

# Re-running configure is cheap (seconds) and picks up changed BUILD_TYPE or
# CMAKE_ARGS; the build itself stays incremental.
configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$(PYTHON) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	$(MPI_ENV); ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error \
	  --timeout $(CTEST_TIMEOUT) -j $(CTEST_JOBS) $(CTEST_ARGS)

# The chart only when this run wrote $(DEMO_JSON) (DEMO_ARGS may not), never from an old file.
demo: build
	rm -f $(DEMO_JSON)
	$(MPI_ENV); mpirun -np $(NP) --oversubscribe --bind-to none $(BOOSTCOMM_CLI) $(DEMO_ARGS)
	@if [[ -f $(DEMO_JSON) ]]; then echo "demo: results written to $(DEMO_JSON)"; \
	  $(PLOT) $(DEMO_JSON) -o $(DEMO_PNG) >/dev/null && echo "demo: chart written to $(DEMO_PNG)"; \
	else echo "demo: no chart (DEMO_ARGS does not write $(DEMO_JSON))"; fi

bench: build
	$(MPI_ENV); mpirun -np $(NP) --oversubscribe --bind-to none $(BOOSTCOMM_CLI) $(BENCH_ARGS)
	@echo "bench: results written to $(BENCH_JSON)"

plots: build
	PYTHON=$(PYTHON) scripts/make_plots.sh $(BUILD_DIR) docs/img

install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

install-check: build
	examples/consumer/check.sh $(BUILD_DIR) $(BUILD_DIR)/install-check $(NP)
	scripts/pip_check.sh $(BUILD_DIR)/pip-check

clean:
	rm -rf $(BUILD_DIR) build-pip-check  # the second: .ci/run's pip check tree

# Re-records which tests of torch's DistributedTest suite pass on gloo here
# (run it when torch changes; ~2 min for both world sizes on 2 cores), into
# tests/torchsuite/gloo_passes.txt's name list (its header comment is kept).
torchsuite-gloo: build
	for ws in 2 3; do BACKEND=gloo WORLD_SIZE=$$ws $(PYTHON) tests/torchsuite/run_suite.py \
	  --json $(abspath $(BUILD_DIR))/torchsuite-gloo$$ws.json || true; done
	$(PYTHON) -c 'import json,sys; f="tests/torchsuite/gloo_passes.txt"; \
	  head=[l for l in open(f) if l.startswith("#")]; \
	  names=sorted({n for ws in (2,3) for n,o in json.load(open(f"$(BUILD_DIR)/torchsuite-gloo{ws}.json"))["outcomes"].items() if o["outcome"]=="PASS"}); \
	  open(f,"w").write("".join(head)+"\n".join(names)+"\n"); print(len(names), "names in", f)'

# The torch backend on the newest torch we check (run it when the backend
# changes; CI tests TORCH_PIN's twin in .venv): its own environment and
# build tree, then the Python tests (torch's suite included).
TORCH_CHECK_PIN  ?= torch==2.14.1
TORCH_CHECK_VENV ?= .venv-torch-check
torch-check: deps
	scripts/make_venv.sh $(TORCH_CHECK_VENV) $(TORCH_CHECK_PIN)
	$(MAKE) test SKIP_DEPS=1 BUILD_DIR=build-torch-check PYTHON=$(abspath $(TORCH_CHECK_VENV))/bin/python \
	  CTEST_ARGS='-L python'

# Sanitizer builds (docs/RELIABILITY.md, "Sanitizers", has their last results):
# each its own tree, RelWithDebInfo with the sanitizer on every object and
# link, no Python module or benchmarks; then the unit and MPI suites (the
# emulated cluster, the 8 GiB large-count test and Python are left out:
# Python would need the runtime preloaded). Findings abort the test
# (halt_on_error / -fno-sanitize-recover), so a finding is a failed test.
# Slow: on 2 cores a tree takes ~30 min to build and its suites longer; run
# them niced. `make asan SAN_CTEST_ARGS='-L unit'` runs the unit suite only;
# SAN_TARGETS='test_a test_b' builds only those (pair it with a ctest -R).
SAN_CTEST_ARGS ?= -L 'unit|mpi' -LE 'emucluster|large|python'
SAN_TARGETS ?=
SAN_FLAGS_asan  := -fsanitize=address -fno-omit-frame-pointer
SAN_FLAGS_ubsan := -fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_FLAGS_tsan  := -fsanitize=thread -fno-omit-frame-pointer
# Both in one tree (one build instead of two; either finding fails the test).
SAN_FLAGS_asan-ubsan := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# Open MPI allocates at init and frees nothing it keeps until exit: leak
# reports there are not ours, so leak checking is off (ASan still catches
# use-after-free, overflows and double frees). TSan: Open MPI's own threads
# are not instrumented; tests/sanitizers/tsan.supp silences its races.
# verify_asan_link_order=0: the interposer tests preload the (instrumented)
# libboostcomm_mpi.so into programs that are not (python3, gfortran's, mpirun's).
SAN_ENV_asan  := ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1:verify_asan_link_order=0
SAN_ENV_ubsan := UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
SAN_ENV_asan-ubsan := $(SAN_ENV_asan) $(SAN_ENV_ubsan)
SAN_ENV_tsan  := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/sanitizers/tsan.supp

# The sanitizer trees build file by file (no unity build, unlike the default):
# there a file that does not include what it uses fails to compile.
asan ubsan asan-ubsan tsan: deps
	cmake -S . -B build-$@ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBOOSTCOMM_BUILD_PYTHON=OFF -DBOOSTCOMM_BUILD_BENCH=OFF \
	  -DCMAKE_UNITY_BUILD=OFF \
	  -DCMAKE_C_FLAGS="$(SAN_FLAGS_$@)" -DCMAKE_CXX_FLAGS="$(SAN_FLAGS_$@)" \
	  -DCMAKE_EXE_LINKER_FLAGS="$(SAN_FLAGS_$@)" -DCMAKE_SHARED_LINKER_FLAGS="$(SAN_FLAGS_$@)" $(CMAKE_ARGS)
	cmake --build build-$@ -j $(JOBS) $(if $(SAN_TARGETS),--target $(SAN_TARGETS))
	$(MPI_ENV); export $(SAN_ENV_$@); ctest --test-dir build-$@ --output-on-failure --no-tests=error \
	  --timeout $$(( $(CTEST_TIMEOUT) * 4 )) -j $(CTEST_JOBS) $(SAN_CTEST_ARGS)
