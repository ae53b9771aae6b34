"""What the TensorFlow drivers (``gsp_tf_driver.py``, ``ccp_tf_driver.py``) share, run by the
TensorFlow interpreter like them (it imports neither torch nor gspdml): :func:`package`, which
stands in for a vendored package's ``__init__.py``, and :func:`serve`, their command line."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf


def package(name: str, folder: Path | None, **attributes) -> types.ModuleType:
    """Register the package ``name`` (its modules read from ``folder``) with ``attributes``, in
    place of its ``__init__.py``."""
    module = types.ModuleType(name)
    module.__path__ = [str(folder)] if folder else []
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def serve(
    script: str,
    install_packages: Callable[[], None],
    run: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
    paths: list[str],
) -> None:
    """``script IN OUT [IN OUT ...]``: the packages installed once, ``tf.function`` bodies run
    eagerly (``gsp_tf_driver.py``'s docstring says why), then each input file's ``run`` results
    to the output file after it."""
    if not paths or len(paths) % 2:
        raise SystemExit(f"usage: {script} IN.npz OUT.npz [IN.npz OUT.npz ...]")
    tf.config.run_functions_eagerly(True)
    install_packages()
    for source, target in zip(paths[::2], paths[1::2]):
        with np.load(source) as inputs:
            results = run(dict(inputs))
        np.savez(target, **results)
