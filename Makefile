# tahoe: `make demo` sets up .venv and runs the demo pipeline; `make test` sets up .venv and runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

demo: setup
	$(VENV)/bin/tahoe demo demo-output

test: setup
	$(PY) -m pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS)

bench: setup
	$(PY) -m bench.snapshot_load

clean:
	rm -rf $(VENV) demo-output .pytest_cache
