# Two commands on a fresh machine: `make run` (the service) and `make test` (lint + tests).
# The service needs no torch; the tests install the `worker` extra too, with torch pinned by
# constraints.txt (the CPU build on this project's machines).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint pytest clean

$(BIN)/.service: pyproject.toml client/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ./client -e .
	touch $@

$(BIN)/.test: $(BIN)/.service
	$(BIN)/pip install -q -c constraints.txt -e ./client -e '.[test,worker]'
	touch $@

run: $(BIN)/.service
	$(BIN)/benchwatch serve

lint: $(BIN)/.test
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy app workers client/benchwatch_client

# Two workers: each database test waits on Postgres or a subprocess part of the time, so two
# keep a 2-core machine busy. Each worker has its own Postgres and Redis databases.
TEST_WORKERS ?= 2

# The tests start some 450 Python processes (workers, CLIs, probes), each importing the
# project; where the environment sets PYTHONDONTWRITEBYTECODE, as this project's machines do,
# each of them compiled every module it imported again. The caches go in __pycache__
# (ignored by git), written atomically, so concurrent processes share them safely.
pytest: $(BIN)/.test
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=30

test: lint pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
