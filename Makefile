# tahoe: `make demo` sets up .venv and runs the demo pipeline; `make test` sets up .venv and runs the tests.
# `setup` also creates .venv-recipient: the official delta-sharing client in its own environment (its
# own pandas/pyarrow pins), the way a recipient runs it; the tests and the demo read through it.
PYTHON ?= python3
VENV ?= .venv
RECIPIENT_VENV ?= .venv-recipient
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed $(RECIPIENT_VENV)/.tahoe-recipient-env .azurite/.installed

# Azurite, the Azure Blob Storage emulator the object-store tests start (npm; Node is on the machine)
.azurite/.installed:
	npm install --prefix .azurite --no-audit --no-fund --loglevel error azurite@3
	touch $@

$(VENV)/.installed: pyproject.toml setup.py tahoe-pyspark-hook.pth
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

$(RECIPIENT_VENV)/.tahoe-recipient-env: $(VENV)/.installed tahoe/sharing/official_client.py
	$(PY) -m tahoe.sharing.official_client ensure $(RECIPIENT_VENV)
	touch $@

demo: setup
	$(VENV)/bin/tahoe demo demo-output --recipient-python $(RECIPIENT_VENV)/bin/python

test: setup
	$(PY) -m pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS)

bench: setup
	$(PY) -m bench.snapshot_load

clean:
	rm -rf $(VENV) $(RECIPIENT_VENV) $(RECIPIENT_VENV).lock demo-output .pytest_cache .azurite
