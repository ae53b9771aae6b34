# `make demo` and `make test` work on a fresh machine: each creates (or reuses) .venv and
# installs exactly what it needs, always with constraints.txt so torch stays the CPU build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet -c constraints.txt
CORE := $(VENV)/.gspdml-core
TESTDEPS := $(VENV)/.gspdml-test

.PHONY: demo test parity-tf experiments benchmarks install system-deps clean-venv

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

# the suite runs in two pytest-xdist workers (the 2 cores it is budgeted on), each at one torch
# thread; worksteal: a worker that runs out of tests takes over half of the other's queue
PYTEST := OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist worksteal

# the step parity with the GSP and CCP authors' TensorFlow code (tests/parity/test_gsp_tf_step.py,
# test_ccp_tf_step.py; they skip in `make test`), in a TensorFlow interpreter of its own built from
# tests/parity/tf-requirements.txt (once: about 75 s and 1.3 GB); CI runs it after `make test`
TF_ENV ?= .tfenv
parity-tf: $(TESTDEPS)
	bash scripts/tf_parity_env.sh $(TF_ENV)
	GSPDML_TF_PYTHON=$(abspath $(TF_ENV))/bin/python $(PYTEST) tests/parity/test_gsp_tf_step.py tests/parity/test_ccp_tf_step.py

# the CPU kernels torch picks on this machine, as it reports them (AVX512, AVX2, DEFAULT, ...)
CPU_CAPABILITY = env -u ATEN_CPU_CAPABILITY $(PY) -c "import torch; print(torch.backends.cpu.get_cpu_capability())"

# layers, formatting, lint and types, the suite, then its numerically sensitive subset
# (tests/conftest.py) as an AVX2-only CPU runs it; on a CPU whose best kernels are AVX2 or less,
# or when the environment already limits them to AVX2 (AVX2_ONLY), the suite itself was that
# run, and a second one would repeat it
AVX2_ONLY := ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
NUMERICS_PATHS := $(PY) -c "import sys; sys.path.insert(0, 'tests'); from conftest import NUMERICS; print(*('tests/' + p for p in NUMERICS))"
test: $(TESTDEPS) system-deps
	PYTHONPATH=src $(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff format --check --quiet src tests experiments scripts benchmarks
	$(VENV)/bin/ruff check --quiet src tests experiments scripts benchmarks
	$(VENV)/bin/mypy
	$(PYTEST)
	@if [ "$$ONEDNN_MAX_CPU_ISA $$ATEN_CPU_CAPABILITY" = "AVX2 avx2" ]; then capability=AVX2; else capability=$$($(CPU_CAPABILITY)); fi; \
	case "$$capability" in \
	  AVX2|DEFAULT) echo "make test: torch's CPU kernels here are $$capability: the suite above was the AVX2-only run of the numerics tests";; \
	  *) paths=$$($(NUMERICS_PATHS)) || exit 1; \
	     echo "$(AVX2_ONLY) $(PYTEST) -m numerics $$paths  # this CPU: $$capability"; \
	     $(AVX2_ONLY) $(PYTEST) -m numerics $$paths;; \
	esac

# re-makes the pre-trained weights the package ships (the demo's backbone), then every experiment
experiments: $(TESTDEPS) system-deps
	$(PY) scripts/ship_pretrained.py
	$(PY) experiments/run_all.py

benchmarks: $(TESTDEPS)
	for script in benchmarks/*.py; do $(PY) $$script || exit 1; done

clean-venv:
	rm -rf $(VENV)
