# Ember: build, demo and tests. `make demo` and `make test` each set everything up on a
# fresh machine (a virtual environment with the pinned executorch and torch, both wheels
# built and installed) before they run.

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
# The executorch pin is written once, in EXECUTORCH_VERSION.
EXECUTORCH_VERSION := $(shell cat EXECUTORCH_VERSION)
FUZZ_SECONDS ?= 60
JOBS ?= 2

PY := $(abspath $(VENV))/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: all setup wheels demo test test-engine test-engine-sanitized test-engine-thread \
        test-python fuzz clean

all: wheels

$(VENV)/.setup-done: EXECUTORCH_VERSION Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==$(TORCH_VERSION) executorch==$(EXECUTORCH_VERSION) \
	    scikit-build-core cmake ninja setuptools wheel pytest pyelftools
	touch $@

setup: $(VENV)/.setup-done

# Both wheels into dist/, then installed into the environment as a user would install them.
wheels: setup
	rm -rf dist
	$(PY) -m pip wheel -q --no-build-isolation --no-deps -w dist .
	$(PY) -m pip wheel -q --no-build-isolation --no-deps -w dist ./python
	$(PY) -m pip install -q --no-deps --force-reinstall dist/*.whl
	$(PY) tools/check_wheel.py dist/ember_executorch_runtime-*.whl

demo: wheels
	$(PY) examples/demo.py

# The engine's C tests, plain and under ASan+UBSan and TSan. The sanitized builds are
# Debug at -O1, as ASan's documentation advises: without a GPU the CUDA op sweep runs its
# plans on the CPU executor, which took 531 s of its 600 s limit at -O0 under ASan and
# about 150 s at -O1, with the same checks and asserts.
test-engine: setup
	cmake -S engine -B build/make-engine -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPython3_EXECUTABLE=$(PY) >/dev/null
	cmake --build build/make-engine -j $(JOBS)
	ctest --test-dir build/make-engine --output-on-failure -j $(JOBS)

test-engine-sanitized: setup
	cmake -S engine -B build/make-engine-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	    -DEMBER_SANITIZE=address,undefined -DCMAKE_C_FLAGS=-O1 \
	    -DPython3_EXECUTABLE=$(PY) >/dev/null
	cmake --build build/make-engine-asan -j $(JOBS)
	ctest --test-dir build/make-engine-asan --output-on-failure -j $(JOBS)

# Without the CUDA op sweep: without a GPU it runs its 1174 plans on the CPU executor in
# one thread, where TSan has nothing to find (the plain and ASan+UBSan runs take it), and
# under TSan it took 430 s, most of CI's time. The tests of concurrent use stay.
test-engine-thread: setup
	cmake -S engine -B build/make-engine-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	    -DEMBER_SANITIZE=thread -DCMAKE_C_FLAGS=-O1 \
	    -DPython3_EXECUTABLE=$(PY) >/dev/null
	cmake --build build/make-engine-tsan -j $(JOBS)
	ctest --test-dir build/make-engine-tsan --output-on-failure -j $(JOBS) -E '^cuda\.test_cuda_ops'

# A bounded libFuzzer run over the plan reader and verifier (clang, from Debian).
fuzz: setup
	@command -v clang >/dev/null || { echo "installing clang for the fuzzer"; \
	    apt-get update -qq && apt-get install -y -qq clang >/dev/null; }
	engine/fuzz/run_fuzz.sh $(FUZZ_SECONDS) build/engine-fuzz

test-python: wheels
	$(PY) -m pytest -q tests

test: test-engine test-engine-sanitized test-engine-thread fuzz test-python

clean:
	rm -rf build dist out
