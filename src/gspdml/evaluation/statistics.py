"""The one mean ± std of the package: over seeds (the sweeps of :mod:`gspdml.workflows.sweeps`),
over the repeats and folds of the protocols (:mod:`gspdml.workflows.protocol`) and over the
realisations of the fair protocol (:mod:`gspdml.evaluation.aggregate`).

    mean = (1/n) sum_i x_i,   std = sqrt( sum_i (x_i - mean)^2 / (n - 1) )

the sample standard deviation (ddof = 1), 0 for a single value. The papers whose protocols the
package runs do not state which std they report (Gürbüz thesis §5.3.4.1: "mean and std over the
81 realisations"; GSP paper Fig. 6 and Fig. 8); the sample std is the one every number here uses.

Every std is reported with what it is over (:func:`spread`, :func:`describe_spread`): the fair
protocol's 81 realisations are built from 12 models and are not independent of one another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


def spread(over: str, count: int, models: int) -> dict[str, Any]:
    """What a std is over: ``over`` the unit ("realisations", "collections", "models", "seeds",
    "repeats"), ``count`` how many of them, ``models`` how many independently trained models
    they are built from. Realisations of the fair protocol share models (81 from 12), so their
    std rests on fewer independent models than it has values."""
    return {"over": over, "count": int(count), "models": int(models)}


def describe_spread(value: Mapping[str, Any]) -> str:
    """One line for a table header, e.g. "sample std over 16 realisations built from 8 models
    (realisations share models: not independent)"."""
    over, count, models = value["over"], value["count"], value["models"]
    if over == "realisations":
        return (
            f"sample std over {count} realisations built from {models} models "
            "(realisations share models: not independent)"
        )
    if over == "collections":
        return (
            f"sample std over {count} disjoint collections (one seed at every fold) "
            f"of {models} models"
        )
    return f"sample std over {count} {over} ({models} independent models)"
