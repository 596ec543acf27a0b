# The two commands that matter: `make demo` (set up, run the main job) and `make test`
# (set up, run the suite). Both work on a fresh Debian machine as root. `make test-gl` runs
# the suite on wgpu's GL backend, `make test-portable` the core tests through wgpu-py's public
# API only (the fallback for another wgpu version): CI runs all three (.ci/run).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export XDG_RUNTIME_DIR ?= /tmp

.PHONY: setup system demo test test-gl test-portable docs bench view lint clean

setup: $(STAMP) system

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

system: $(STAMP)
	@bash scripts/ensure_system.sh $(BIN)/python

demo: setup
	$(BIN)/wgcompute demo

test: setup
	$(BIN)/python -m pytest -q

# The GL backend needs Mesa's EGL and GL drivers (llvmpipe without a GPU): `system` checks.
test-gl: export WGCOMPUTE_WITH_GL := 1
test-gl: setup
	WGCOMPUTE_BACKEND=gl $(BIN)/python -m pytest -q

# The core of the suite: buffers, transfers, kernels, commands, pipelines, streams, devices,
# threads, surfaces.
PORTABLE_TESTS := $(addprefix tests/,test_buffers.py test_dtypes.py test_transfers.py \
	test_copy.py test_kernels_core.py test_fast_kernels.py test_reduce.py test_matmul.py \
	test_custom_kernels.py test_custom_kernels_reflected.py test_in_place.py test_async.py \
	test_examples_async.py test_pipeline.py test_streams.py test_runtime.py test_errors.py \
	test_threads.py test_surface.py)
test-portable: setup
	WGCOMPUTE_NATIVE=portable $(BIN)/python -m pytest -q $(PORTABLE_TESTS)

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
