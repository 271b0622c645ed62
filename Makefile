# Two commands on a fresh machine: `make run` (the service) and `make test` (lint + tests).
# torch (the `worker` extra) is pinned by constraints.txt to the CPU build for the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test lint pytest clean

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[test,worker]'
	touch $@

run: $(BIN)/.installed
	$(BIN)/benchwatch serve

lint: $(BIN)/.installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy app workers

pytest: $(BIN)/.installed
	$(BIN)/pytest

test: lint pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
