# Two commands: `make run` and `make test`. Everything else is a helper they call.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test install install-dev services lint bench clean screenshots editor

# `make run` needs only the runtime dependencies (and the production server, for the demo's
# production mode: README "Production"); the test tools come with `make test`.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[serve]'
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

test: lint
	@bash scripts/services.sh || test "$$CI" != "true"
	@bash scripts/ensure_chromium.sh || test "$$CI" != "true"
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# ruff, then mypy on the package as pyproject.toml's [tool.mypy] configures it (0 errors)
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: install-dev
	@bash scripts/services.sh
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)
	$(BIN)/python scripts/bench_docs.py

# The README's four screenshots, taken by the browser tests that show those pages (tests/readme_screenshots.py).
SCREENSHOT_TESTS := \
	tests/newcomer/test_playground_browser.py::test_handoff_banner_human_label_and_sandbox_mark \
	tests/admin/test_browser.py::test_take_over_reply_and_give_back_in_a_browser \
	tests/desk/test_desk_browser.py::test_two_staff_users_on_the_desk \
	tests/flows_data/test_editor_browser.py::test_a_readme_style_flow_reads_as_valid_and_a_broken_one_shows_the_servers_message

screenshots: install-dev
	@bash scripts/ensure_chromium.sh
	FALAI_SCREENSHOTS=docs/screenshots $(BIN)/python -m pytest -o addopts= -q $(SCREENSHOT_TESTS)
	@ls -l docs/screenshots

# The flow editor's bundle (needs Node.js; the built file is committed): after changing frontend/.
editor:
	bash scripts/build_editor.sh

clean:
	rm -rf $(VENV) .pytest_cache bench/results/*.json
