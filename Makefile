# `make demo` and `make test` work on a fresh machine: each creates (or reuses) .venv and
# installs exactly what it needs, always with constraints.txt so torch stays the CPU build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet -c constraints.txt
CORE := $(VENV)/.gspdml-core
TESTDEPS := $(VENV)/.gspdml-test

.PHONY: demo test experiments benchmarks install system-deps clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)

# the library and its CLI (what `make demo` needs)
$(CORE): $(PY) pyproject.toml constraints.txt
	$(PIP) torch==2.13.0
	$(PIP) -e .
	touch $(CORE)

# plus the test-only references (pytorch-metric-learning, POT, faiss, onnx, timm, ...)
$(TESTDEPS): $(CORE)
	$(PIP) -e '.[test]'
	touch $(TESTDEPS)

install: $(CORE)

demo: $(CORE)
	$(VENV)/bin/gspdml demo

system-deps:
	bash scripts/system-deps.sh

# layers, formatting, lint and types, the suite, then its numerically sensitive subset (tests/conftest.py) as an AVX2-only CPU runs it
test: $(TESTDEPS) system-deps
	PYTHONPATH=src $(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff format --check --quiet src tests experiments scripts benchmarks
	$(VENV)/bin/ruff check --quiet src tests experiments scripts benchmarks
	$(VENV)/bin/mypy
	$(PY) -m pytest -q
	ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 $(PY) -m pytest -q -m numerics

experiments: $(TESTDEPS) system-deps
	$(PY) experiments/run_all.py

benchmarks: $(TESTDEPS)
	for script in benchmarks/*.py; do $(PY) $$script || exit 1; done

clean-venv:
	rm -rf $(VENV)
