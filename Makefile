# `make demo` sets up a virtual environment and runs the demo; `make test` runs the whole suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_WORKERS ?= 2

.PHONY: demo test test-latest bench bench-cpu bench-jax bench-compile bench-xla-hlo lint lock clean aot-example aot-tools

# Installs come from requirements.lock: exact versions with hashes of the runtime and test
# dependencies (transitively) and of the build backend (setuptools). One lock serves both
# targets, so demo installs the test tools too (a little more than it needs) but every .venv
# holds the same tested set. pip's hash-checking mode refuses an unhashed editable
# requirement, so the project itself goes in second, without deps and without build isolation
# (setuptools comes from the lock). `make lock` regenerates the lock; `make test-latest` tests
# the newest releases within pyproject.toml's ranges instead.
$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.runtime: requirements.lock pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --require-hashes -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.test: $(VENV)/.runtime
	touch $@

demo: $(VENV)/.runtime
	$(BIN)/python examples/demo.py

# The cpu backend's suites again for lower targets, whose code runs on any x86-64 machine
# this runs on: x86-64-v3 (AVX2, no AVX-512), x86-64-v2 (SSE4.2: no AVX, F16C or FMA, so
# half conversions and fma are runtime-library calls) and cooperlake (AVX-512 with VNNI and
# BF16 but no FP16, as on AMD Zen 4 and 5: 512-bit half arithmetic through F16C). A target
# this machine cannot run (RUNS_HERE) is skipped with a line that says so, and so is one whose
# code paths are the host's (COVERED: target.CODE_FEATURES alike, as x86-64-v3 on Zen 3, where
# it repeated the host run's 9 minutes). The first run covers the host; test_libcalls.py
# compiles for every target itself. A lower target's pass runs every test function but every
# other parameter set of each (XLAPY_PARAM_STRIDE=2, tests/conftest.py): the whole grid again
# per target put CI past 30 minutes on a 2-core Zen 3. worksteal: a long test left at the end
# of one worker's share no longer idles the other core.
CPU_SUITES := tests/unit/backends/cpu tests/conformance/test_interpret_cpu.py \
	tests/differential/test_cpu_vs_interpreter.py \
	tests/differential/jax_programs/test_jax_programs.py::test_matches_jax_on_cpu \
	--ignore=tests/unit/backends/cpu/test_libcalls.py
CPU_TARGETS ?= x86-64-v3 x86-64-v2 cooperlake
export RUNS_HERE := import sys; from xlapy.backends.cpu import target; \
	sys.exit(not target.resolve(sys.argv[1]).runs_here)
export COVERED := import sys; from xlapy.backends.cpu import target; \
	sys.exit(not target.resolve(sys.argv[1]).covered_by_host)

test: $(VENV)/.test
	$(BIN)/ruff check xlapy tests examples benchmarks
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal -p no:cacheprovider tests
	for t in $(CPU_TARGETS); do \
	    if ! $(BIN)/python -c "$$RUNS_HERE" $$t; then \
	        echo "cpu target $$t: this machine cannot run its code; its suites are skipped"; \
	        continue; fi; \
	    if $(BIN)/python -c "$$COVERED" $$t; then \
	        echo "cpu target $$t: the host run covered it (same vector features); skipped"; \
	        continue; fi; \
	    XLAPY_CPU_TARGET=$$t XLAPY_PARAM_STRIDE=2 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) \
	        --dist worksteal -p no:cacheprovider $(CPU_SUITES) || exit 1; \
	done

# Ahead-of-time example (examples/aot): `xlapy aot` compiles the MLP and the CNN to objects, a
# C program links them (no Python, no xlapy runtime), check.py compares its outputs with the
# interpreter and prints object sizes and the C program's time per call against the JIT's.
AOT_BUILD ?= build/aot
CC ?= gcc
aot-example: $(VENV)/.runtime
	mkdir -p $(AOT_BUILD)
	$(BIN)/python -m xlapy aot examples/aot/mlp.mlir --name mlp -o $(AOT_BUILD)
	$(BIN)/python -m xlapy aot examples/aot/cnn.mlir --name cnn -o $(AOT_BUILD)
	$(CC) -O2 -std=c99 -D_POSIX_C_SOURCE=200809L -I $(AOT_BUILD) -o $(AOT_BUILD)/demo \
	    examples/aot/main.c $(AOT_BUILD)/mlp.o $(AOT_BUILD)/cnn.o -lm
	$(BIN)/python examples/aot/check.py $(AOT_BUILD)

# The cross toolchain and emulator the aarch64 AOT tests use (tests/aot), when apt can.
aot-tools:
	command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null || \
	    { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	      apt-get update -q >/dev/null && \
	      apt-get install -y -q gcc-aarch64-linux-gnu qemu-user >/dev/null; } || \
	    echo "aot-tools: gcc-aarch64-linux-gnu / qemu-user not installed (the aarch64 AOT tests say so)"

# Newest releases within pyproject.toml's ranges, in their own venv (not part of .ci/run).
LATEST ?= .venv-latest
test-latest:
	test -x $(LATEST)/bin/python || $(PY) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q --upgrade pip
	$(LATEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e '.[test]'
	$(LATEST)/bin/ruff check xlapy tests examples benchmarks
	$(LATEST)/bin/python -m pytest -n $(PYTEST_WORKERS) -p no:cacheprovider tests
	for t in $(CPU_TARGETS); do \
	    XLAPY_CPU_TARGET=$$t $(LATEST)/bin/python -m pytest -n $(PYTEST_WORKERS) \
	        -p no:cacheprovider $(CPU_SUITES) || exit 1; \
	done

bench: $(VENV)/.test
	$(BIN)/python benchmarks/interpreter.py

bench-cpu: $(VENV)/.test
	$(BIN)/python benchmarks/run.py

bench-jax: $(VENV)/.test
	$(BIN)/python benchmarks/jax_run.py

# Cold compile time vs XLA's on the JAX workloads, with xlapy's phases (issue 14).
bench-compile: $(VENV)/.test
	$(BIN)/python benchmarks/compile_time.py

# XLA's optimized HLO vs the same programs' StableHLO on the cpu backend, and vs XLA (issue 20).
bench-xla-hlo: $(VENV)/.test
	$(BIN)/python benchmarks/xla_hlo_run.py

lint: $(VENV)/.test
	$(BIN)/ruff check xlapy tests examples benchmarks

# Regenerates requirements.lock with uv (in its own throwaway venv, .venv-lock): a universal
# resolution (every platform, Python 3.11+) with one version of each package for all of them.
LOCK_VENV ?= .venv-lock
lock:
	test -x $(LOCK_VENV)/bin/uv || { $(PY) -m venv $(LOCK_VENV) && \
	    $(LOCK_VENV)/bin/python -m pip install -q uv; }
	printf 'setuptools>=68\n' | $(LOCK_VENV)/bin/uv pip compile pyproject.toml - \
	    --extra test --generate-hashes --universal --python-version 3.11 \
	    --fork-strategy fewest --upgrade --quiet --custom-compile-command 'make lock' \
	    -o requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
