# `make demo` and `make test` are the only set-up commands: each creates .venv if needed,
# installs what it needs (again only when pyproject.toml changed) and runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck unit bench clean

demo: $(VENV)/.installed-core
	$(BIN)/python examples/demo.py

test: lint typecheck unit

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# PostgreSQL and Redis run on loopback for the session tests; scripts/test-services stops
# them again however pytest ends, and exits with pytest's status.
unit: $(VENV)/.installed-dev
	scripts/test-services run $(BIN)/pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/loop.py
	$(BIN)/python bench/context.py
	scripts/test-services run $(BIN)/python bench/stores.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .services

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed-core
