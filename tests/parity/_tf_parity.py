"""The suite's side of the step-parity tests against the authors' TensorFlow code
(``test_gsp_tf_step.py``, ``test_ccp_tf_step.py``): their marks (slow; skipped without
``GSPDML_TF_PYTHON``) and :func:`authors_run`, which hands each case's arrays to a driver script
(``gsp_tf_driver.py``, ``ccp_tf_driver.py``) in that TensorFlow interpreter and reads its
results back. The drivers' own shared part is ``_tf_driver.py``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

TF_PYTHON = os.environ.get("GSPDML_TF_PYTHON")


def marks(whose: str) -> list[pytest.MarkDecorator]:
    """A TF parity module's ``pytestmark``: slow, and skipped while ``GSPDML_TF_PYTHON`` is unset
    (``whose``: the authors named in the reason, "GSP" or "CCP")."""
    return [
        pytest.mark.slow,
        pytest.mark.skipif(
            not TF_PYTHON,
            reason=f"needs the TensorFlow interpreter of the {whose} authors' code: "
            "bash scripts/tf_parity_env.sh DIR, then GSPDML_TF_PYTHON=DIR/bin/python",
        ),
    ]


def authors_run(
    driver: Path, folder: Path, cases: dict[str, dict[str, np.ndarray]]
) -> dict[str, dict[str, np.ndarray]]:
    """The TF side: ``driver`` run once by ``GSPDML_TF_PYTHON`` on every case (``IN OUT`` file
    pairs written to ``folder``), its outputs by case. A ``GSPDML_TF_PYTHON`` that is not a file
    fails with the fix."""
    if not Path(str(TF_PYTHON)).is_file():
        pytest.fail(
            f"GSPDML_TF_PYTHON={TF_PYTHON} is not a file; point it at the python of an environment "
            "made by bash scripts/tf_parity_env.sh DIR (DIR/bin/python), or unset it to skip"
        )
    paths = {name: (folder / f"{name}.in.npz", folder / f"{name}.out.npz") for name in cases}
    for name, (source, _) in paths.items():
        np.savez(source, **cases[name])
    done = subprocess.run(
        [str(TF_PYTHON), str(driver), *(str(path) for pair in paths.values() for path in pair)],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = {}
    for name, (_, target) in paths.items():
        with np.load(target) as arrays:
            results[name] = dict(arrays)
    return results
