# gpufinops: `make install`, `make demo` and `make test` work from a fresh clone with only python3 (3.11+) and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOME_DIR ?= demo

.PHONY: install demo test test-fast check docs docs-tables bench bench-quick dashboard clean

# pip's output (the build backend's among it) goes to $(PIP_LOG), its tail shown only when an install
# fails: `make demo` prints one line per install step, then the demo. `$(PIP) ARGS` runs `pip install ARGS`.
PIP_LOG := $(VENV)/install.log
PIP = @sh -c 'echo "pip install $$* (its output: $(PIP_LOG))" >&2; \
	$(BIN)/python -m pip install --disable-pip-version-check "$$@" >>$(PIP_LOG) 2>&1 || \
	{ tail -n 60 $(PIP_LOG) >&2; echo "pip install $$* failed: the whole log is $(PIP_LOG)" >&2; exit 1; }' pip

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit("gpufinops needs Python 3.11+") if sys.version_info < (3, 11) else None'
	@$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) -e .
	@touch $@

# What `make demo` needs for every command its summary prints (the dashboard among them).
$(VENV)/.installed-dashboard: pyproject.toml $(VENV)/.installed
	$(PIP) -e '.[dashboard]'
	@touch $@

# Everything a user of their own clouds needs: the AWS and Google Cloud SDKs and the dashboard.
$(VENV)/.installed-user: pyproject.toml $(VENV)/.installed
	$(PIP) -e '.[aws,gcp,dashboard]'
	@touch $@

$(VENV)/.installed-all: pyproject.toml $(VENV)/.installed
	$(PIP) -e '.[aws,gcp,dashboard,mcp,test,docs]'
	@touch $@

install: $(VENV)/.installed-user
	@echo "installed $$($(BIN)/gpufinops --version) with the aws, gcp and dashboard extras: $(BIN)/gpufinops"

demo: $(VENV)/.installed-dashboard
	@$(BIN)/gpufinops demo --home $(HOME_DIR)

# The BigQuery API emulator the GCP billing-export tests run against, in its own venv (it pins
# protobuf 6); DuckDB's spatial extension is copied from its wheel so the emulator never downloads it.
BQ_VENV := .venv-bq
BQ_EXTENSIONS := $(HOME)/.duckdb/extensions/v1.5.5/linux_amd64
$(BQ_VENV)/.installed:
	$(PYTHON) -m venv $(BQ_VENV)
	$(BQ_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BQ_VENV)/bin/python -m pip install --quiet 'bqemulator==1.4.0' 'duckdb==1.5.5' 'duckdb-extension-spatial==1.5.5' 'numpy>=2,<3'
	mkdir -p $(BQ_EXTENSIONS)
	cp "$$($(BQ_VENV)/bin/python -c 'import duckdb_extension_spatial as m, pathlib; print(next(pathlib.Path(m.__file__).parent.rglob("spatial.duckdb_extension")))')" $(BQ_EXTENSIONS)/
	touch $@

# The FinOps Foundation's FOCUS validator (PyPI focus-validator 2.2.1) wants Python >= 3.12: where one
# is found it gets a venv of its own, and tests/test_focus_conformance.py cross-checks its verdicts
# with the rules runner the suite uses on 3.11 (without one, that cross-check is skipped).
FOCUS_VENV := .venv-focus
FOCUS_PYTHON ?= $(shell for p in python3.13 python3.12 $(wildcard $(HOME)/.pyenv/versions/3.1[2-9]*/bin/python); do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo $$p; break; }; done)
$(FOCUS_VENV)/.installed:
	@if [ -z "$(FOCUS_PYTHON)" ]; then echo "no Python >= 3.12 here: the real FOCUS validator cross-check is skipped"; \
	else $(FOCUS_PYTHON) -m venv $(FOCUS_VENV) && \
	$(FOCUS_VENV)/bin/python -m pip install --quiet 'focus-validator==2.2.1' 'pyarrow<19' && touch $@; fi

# The suite runs in one pytest worker per core (pytest-xdist; at most 4: each worker builds its own session
# fixtures, demo warehouses among them), a file's tests together in one worker. `make test TEST_WORKERS=0`
# runs it in this process alone, as a plain `pytest` does.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
test: $(VENV)/.installed-all $(BQ_VENV)/.installed $(FOCUS_VENV)/.installed
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# The inner loop: the whole suite but the tests marked `browser` (Chromium), `emulator` (bqemulator,
# Prometheus, the FOCUS validator) or `slow` (more than ~10 s); markers in pyproject.toml, tests/conftest.py.
test-fast: $(VENV)/.installed-all
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not browser and not emulator and not slow"

# Lint, format and types (configured in pyproject.toml), and the documentation site built strictly;
# .ci/run runs it before the tests.
check: $(VENV)/.installed-all
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(MKDOCS_BUILD)

# The documentation site (mkdocs.yml, docs/) into site/ (git-ignored): a broken link or anchor, or a
# page missing from the nav, fails the build (not with --quiet: mkdocs 1.6 then counts no warning).
MKDOCS_BUILD = NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
$(VENV)/.installed-docs: pyproject.toml $(VENV)/.installed
	$(PIP) -e '.[docs]'
	@touch $@

docs: $(VENV)/.installed-docs
	$(MKDOCS_BUILD)
	@echo "built the documentation into site/: open site/index.html"

# The docs' tables generated from the specs (sources, their freshness, the recommendation kinds): run after adding
# a source or a kind (docs/architecture.md's recipes); tests/test_docs.py fails while a page drifts.
docs-tables: $(VENV)/.installed
	$(BIN)/python -m gpufinops.jobs.docs_tables --write

# What the benchmarks need: the dashboard, and the browser bench's playwright and httpx (it reads the page
# table and the render wait of tests/test_dashboard_browser.py, so a new page is measured with no new code).
$(VENV)/.installed-bench: pyproject.toml $(VENV)/.installed
	$(PIP) -e '.[dashboard,bench]'
	@touch $@

bench: $(VENV)/.installed-bench
	$(BIN)/python -m bench.run_all

# The inner loop of performance work (a few minutes): a 200-GPU fleet's 3 days in both arrival orders,
# each stage beside its DuckDB floor; the data is generated once into bench/.cache. The real size:
# `$(BIN)/python -m bench.bench_month --gpus 10000` (docs/scale.md).
bench-quick: $(VENV)/.installed
	$(BIN)/python -m bench.bench_month --quick

dashboard: $(VENV)/.installed-dashboard
	@test -f $(HOME_DIR)/gpufinops.toml || $(MAKE) demo
	$(BIN)/gpufinops --config $(HOME_DIR)/gpufinops.toml dashboard

clean:
	rm -rf $(VENV) $(BQ_VENV) $(FOCUS_VENV) $(HOME_DIR) data bench/.cache .pytest_cache site
