# The two commands that matter: `make demo` (set up, run the main job) and `make test`
# (set up, run the suite). Both work on a fresh Debian machine as root.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export XDG_RUNTIME_DIR ?= /tmp

.PHONY: setup system demo test docs bench view lint clean

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
