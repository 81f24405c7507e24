# Two commands: `make run` and `make test`. Everything else is a helper they call.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install services lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

services:
	@bash scripts/services.sh

run: install
	$(BIN)/python scripts/run_demo.py

test: install
	@bash scripts/services.sh || test "$$CI" != "true"
	@bash scripts/ensure_chromium.sh || test "$$CI" != "true"
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .

bench: install
	@bash scripts/services.sh
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)
	$(BIN)/python scripts/bench_docs.py

clean:
	rm -rf $(VENV) .pytest_cache bench/results/*.json
