"""The statistic a family of runs over seeds is reported with: mean +- sample std (the GSP paper's
hyper-parameter studies, GSP paper Fig. 6 and Fig. 8, and every experiment script; the runs
themselves are trained by :mod:`gspdml.workflows.runner`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "std"}`` with the sample (``ddof = 1``) std; 0 for a single value."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("mean_std needs at least one value")
    return {"mean": float(values.mean()), "std": float(values.std(ddof=1)) if values.size > 1 else 0.0}
