"""The one mean ± std of the package: over seeds (the sweeps of :mod:`gspdml.workflows.sweeps`),
over the repeats and folds of the protocols (:mod:`gspdml.workflows.protocol`) and over the
realisations of the fair protocol (:mod:`gspdml.evaluation.aggregate`).

    mean = (1/n) sum_i x_i,   std = sqrt( sum_i (x_i - mean)^2 / (n - 1) )

the sample standard deviation (ddof = 1), 0 for a single value. The papers whose protocols the
package runs do not state which std they report (Gürbüz thesis §5.3.4.1: "mean and std over the
81 realisations"; GSP paper Fig. 6 and Fig. 8); the sample std is the one every number here uses.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from gspdml.errors import ConfigError

#: the degrees of freedom of every reported std: the sample std
DDOF = 1


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "std"}`` of ``values``, the std the sample one (``ddof = 1``); 0 for one value."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        raise ConfigError("values", "mean_std needs at least one value, got none")
    std = float(array.std(ddof=DDOF)) if array.size > 1 else 0.0
    return {"mean": float(array.mean()), "std": std}
