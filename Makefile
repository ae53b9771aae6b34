# `make demo` and `make test` work on a fresh machine: each creates (or reuses) .venv and
# installs exactly what it needs, always with constraints.txt so torch stays the CPU build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet -c constraints.txt
STAMP := $(VENV)/.gspdml-installed

.PHONY: demo test experiments benchmarks install system-deps clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) pyproject.toml constraints.txt
	$(PIP) torch==2.13.0
	$(PIP) -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/gspdml demo

system-deps:
	bash scripts/system-deps.sh

test: $(STAMP) system-deps
	$(PY) -m pytest -q

experiments: $(STAMP) system-deps
	$(PY) experiments/run_all.py

benchmarks: $(STAMP)
	for script in benchmarks/*.py; do $(PY) $$script || exit 1; done

clean-venv:
	rm -rf $(VENV)
