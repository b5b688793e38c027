# `make demo` sets up a virtual environment and runs the demo; `make test` runs the whole suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_WORKERS ?= 2

.PHONY: demo test bench bench-cpu lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(VENV)/.runtime $@

demo: $(VENV)/.runtime
	$(BIN)/python examples/demo.py

test: $(VENV)/.test
	$(BIN)/ruff check xlapy tests examples benchmarks
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -p no:cacheprovider tests

bench: $(VENV)/.test
	$(BIN)/python benchmarks/interpreter.py

bench-cpu: $(VENV)/.test
	$(BIN)/python benchmarks/run.py

lint: $(VENV)/.test
	$(BIN)/ruff check xlapy tests examples benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
