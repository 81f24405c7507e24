# Two commands: `make run` and `make test`. Everything else is a helper they call.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test install install-dev services lint bench clean

# `make run` needs only the runtime dependencies; the test tools come with `make test`.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(DEV_STAMP)

install: $(STAMP)

install-dev: $(DEV_STAMP)

services:
	@bash scripts/services.sh

run: install
	$(BIN)/python scripts/run_demo.py

test: install-dev
	@bash scripts/services.sh || test "$$CI" != "true"
	@bash scripts/ensure_chromium.sh || test "$$CI" != "true"
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install-dev
	$(BIN)/ruff check .

bench: install-dev
	@bash scripts/services.sh
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)
	$(BIN)/python scripts/bench_docs.py

clean:
	rm -rf $(VENV) .pytest_cache bench/results/*.json
