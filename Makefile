# gpufinops: `make demo` and `make test` work from a fresh clone with only python3 (3.11+) and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOME_DIR ?= demo

.PHONY: demo test bench dashboard clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit("gpufinops needs Python 3.11+") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-all: pyproject.toml $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dashboard,test]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/gpufinops demo --home $(HOME_DIR)

test: $(VENV)/.installed-all
	$(BIN)/python -m pytest

bench: $(VENV)/.installed
	$(BIN)/python -m bench.run_all

dashboard: $(VENV)/.installed-all
	@test -f $(HOME_DIR)/gpufinops.toml || $(MAKE) demo
	$(BIN)/gpufinops --config $(HOME_DIR)/gpufinops.toml dashboard

clean:
	rm -rf $(VENV) $(HOME_DIR) data bench/.cache .pytest_cache
