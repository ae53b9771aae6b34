"""Train a family of runs that differ by a few config overrides, over several seeds, and
aggregate their test metrics (mean +- sample std over seeds) -- the shape of the GSP paper's
hyper-parameter studies (seed 000 Fig. 6 effect of mu, Fig. 8 m-eps grid). Each run is trained
from scratch (``fresh`` in :mod:`gspdml.workflows.runner`): a sweep measures every variant anew."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.workflows.runner import PlannedRun, run_planned


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "std"}`` with the sample (``ddof = 1``) std; 0 for a single value."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("mean_std needs at least one value")
    return {"mean": float(values.mean()), "std": float(values.std(ddof=1)) if values.size > 1 else 0.0}


def run_sweep(
    base: str | Path | Mapping[str, Any],
    variants: Mapping[str, Sequence[str]],
    seeds: Sequence[int],
    output_dir: str | Path,
    overrides: Sequence[str] = (),
    metrics: Sequence[str] = ("map_at_r", "precision_at_1"),
    log=print,
) -> dict[str, dict[str, Any]]:
    """Train ``base`` + ``overrides`` + ``variants[label]`` for every label and seed.

    Runs go to ``<output_dir>/<label>-seed<seed>/``, replacing an older run there (label characters
    other than letters, digits, ``.=_-`` become ``_``). Returns ``{label: {"overrides", "per_seed": [{"seed", "seconds",
    "steps", <metric>: test value}], <metric>: {"mean", "std"}}}``.
    """
    if not seeds:
        raise ConfigError("seeds", "need at least one seed")
    out: dict[str, dict[str, Any]] = {}
    for label, extra in variants.items():
        safe = "".join(ch if ch.isalnum() or ch in ".=_-" else "_" for ch in label)
        rows = []
        for seed in seeds:
            config = load_config(
                base, [*overrides, *extra, f"seed={seed}", f"name={safe}-seed{seed}", f"output_dir={output_dir}"]
            )
            outcome = run_planned(PlannedRun(config["name"], config, Path(output_dir) / config["name"]), fresh=True)
            row = {"seed": seed, "seconds": outcome.seconds, "steps": outcome.results["steps"]}
            row.update({m: float(outcome.results["test"][m]) for m in metrics})
            rows.append(row)
            log(f"{label} seed {seed}: " + "  ".join(f"{m} {100 * row[m]:.2f}" for m in metrics)
                + f"  ({row['steps']} steps, {row['seconds']:.0f} s)")
        out[label] = {"overrides": list(extra), "per_seed": rows}
        out[label].update({m: mean_std([r[m] for r in rows]) for m in metrics})
    return out
