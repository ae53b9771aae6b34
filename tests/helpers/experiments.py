"""Loads an experiment script (``experiments/<name>/run.py``) as a module for the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def load_experiment(name: str):
    """The module ``experiments/<name>/run.py`` under the unique name ``exp_<name>``."""
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    spec = importlib.util.spec_from_file_location(f"exp_{name}", EXPERIMENTS / name / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_common():
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    import common

    return common
