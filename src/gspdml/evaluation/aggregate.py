"""Test results of the fair protocol: 128D average, 512D concatenation, 81 realisations.

Gürbüz thesis §5.3.4.1 (fair evaluation, embedding vectors; Musgrave et al. 2020, §4):

- "128D": the mean over the F fold models of each model's metric on its own test embeddings.
- "512D": the metric of the concatenation [ê_1; ...; ê_F] of the fold models' L2-normalised
  embeddings, re-normalised (powerful-benchmarker's ``ConcatenateEmbeddings``).
- With S training seeds per fold, every choice (s_1, ..., s_F) in seeds^F is one realisation
  (3^4 = 81 in Ch. 5); the tables report the mean and standard deviation over realisations
  (thesis §5.3.4.1; GSP paper §4, "Fair evaluation").

The 81 realisations share only F x S = 12 models, so their std is smaller than the spread of the
models themselves. The summary also keeps two spreads of independent units: ``models`` (the F x S
models' own 128-D metrics) and ``collections`` (the S disjoint collections that take seed s at
every fold, the unit of Musgrave et al. 2020's reproductions); ``spread`` says what each std is
over (:func:`gspdml.evaluation.statistics.spread`). Means and stds are
:func:`gspdml.evaluation.statistics.mean_std`'s (sample std, ddof = 1; 0 for one realisation).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np
import torch

from gspdml.compat.hardware import Precision
from gspdml.errors import ConfigError
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings, with_postprocessed
from gspdml.evaluation.statistics import mean_std, spread

TABLE_METRICS = ("precision_at_1", "map_at_r")


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    """Rows divided by their Euclidean norm (float64; zero rows stay zero)."""
    x = torch.as_tensor(x).to(torch.float64)
    tiny = torch.finfo(torch.float64).tiny
    normalized: torch.Tensor = x / x.norm(dim=1, keepdim=True).clamp_min(tiny)
    return normalized


def concatenate_embeddings(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """[ê_1; ...; ê_F] / sqrt(F): each part L2-normalised, concatenated, re-normalised (float64)."""
    if not parts:
        raise ConfigError("embeddings", "nothing to concatenate")
    return l2_normalize(torch.cat([l2_normalize(p) for p in parts], dim=1))


def fair_protocol_results(
    test_embeddings: Mapping[Any, Any],
    *,
    metrics: Sequence[str] = TABLE_METRICS,
    spec: Optional[EvalSpec] = None,
    train_embeddings: Optional[Mapping[Any, torch.Tensor | np.ndarray]] = None,
    device: Optional[torch.device] = None,
    precision: Precision = "auto",
) -> dict[str, Any]:
    """Aggregate the fold models of the fair protocol on the test split (module docstring).

    Args:
        test_embeddings: {(fold, seed): split} with ``split`` either ``(embeddings, labels)``
            (leave-one-out) or ``(query, query_labels, gallery, gallery_labels)``. Every fold
            must have the same seeds, and every split the same labels.
        metrics: scalar keys of the evaluation service's report to aggregate (with their
            ``postprocessed_`` twins when ``spec`` post-processes).
        spec: what each model and concatenation is scored with (None: the default spec).
        train_embeddings: {(fold, seed): training embeddings} for a step that learns on them
            (PCA-whitening); a realisation concatenates them.
        device: where the search and the metrics run (None: where the embeddings are).
        precision: the runs' precision, for the search's candidate pass (its neighbours are
            exact; ``auto`` is resolved for the search's device).

    Returns:
        {"per_model": {(fold, seed): {metric: value}},
         "realisations": [{"seeds": (s_1..s_F), "128D": {metric: v}, "512D": {metric: v}}, ...],
         "summary": {"128D": {metric: {"mean", "std"}}, "512D": {...}, "models": {...},
                     "collections 128D": {...}, "collections 512D": {...}},
         "spread": {group: {"over", "count", "models"}},
         "num_folds", "seeds", "num_realisations"}
    """
    spec = spec if spec is not None else EvalSpec()
    folds, seeds = _grid(test_embeddings)
    splits = {key: _as_split(value, key) for key, value in test_embeddings.items()}
    _check_same_labels(splits)
    metrics = with_postprocessed(metrics, spec)
    train = dict(train_embeddings or {})

    def score(split: Sequence[Any], train_part: Optional[torch.Tensor]) -> dict[str, float]:
        if device is not None and not spec.postprocess:  # the embeddings; labels stay
            split = [
                torch.as_tensor(x).to(device) if i % 2 == 0 else x for i, x in enumerate(split)
            ]
        query, labels, gallery, gallery_labels = (*split, None, None)[:4]
        report = evaluate_embeddings(
            query, labels, gallery, gallery_labels, spec, train_part, precision
        )
        return _select(report.metrics, metrics)

    per_model = {key: score(split, train.get(key)) for key, split in splits.items()}
    realisations: list[dict[str, Any]] = []
    for choice in itertools.product(seeds, repeat=len(folds)):
        keys = [(fold, seed) for fold, seed in zip(folds, choice)]
        average = {m: float(np.mean([per_model[key][m] for key in keys])) for m in metrics}
        first = splits[keys[0]]
        concat = [concatenate_embeddings([splits[key][0] for key in keys]), first[1]]
        if len(first) == 4:
            concat += [concatenate_embeddings([splits[key][2] for key in keys]), first[3]]
        train_concat = concatenate_embeddings([train[key] for key in keys]) if train else None
        realisations.append(
            {"seeds": tuple(choice), "128D": average, "512D": score(concat, train_concat)}
        )
    disjoint = [r for r in realisations if len(set(r["seeds"])) == 1]
    models, spaces = len(per_model), ("128D", "512D")
    summary = {
        space: {m: mean_std([r[space][m] for r in realisations]) for m in metrics}
        for space in spaces
    }
    summary["models"] = {m: mean_std([v[m] for v in per_model.values()]) for m in metrics}
    for space in spaces:
        summary[f"collections {space}"] = {
            m: mean_std([r[space][m] for r in disjoint]) for m in metrics
        }
    spreads = {space: spread("realisations", len(realisations), models) for space in spaces}
    spreads["models"] = spread("models", models, models)
    for space in spaces:
        spreads[f"collections {space}"] = spread("collections", len(disjoint), models)
    return {
        "per_model": per_model,
        "realisations": realisations,
        "summary": summary,
        "spread": spreads,
        "num_folds": len(folds),
        "seeds": list(seeds),
        "num_realisations": len(realisations),
    }


def _grid(test_embeddings: Mapping[Any, Any]) -> tuple[list[Any], list[Any]]:
    if not test_embeddings:
        raise ConfigError("test_embeddings", "no (fold, seed) entries")
    try:
        folds = sorted({fold for fold, _ in test_embeddings})
        seeds = sorted({seed for _, seed in test_embeddings})
    except (TypeError, ValueError) as exc:
        raise ConfigError("test_embeddings", "keys must be (fold, seed) pairs") from exc
    missing = [(f, s) for f in folds for s in seeds if (f, s) not in test_embeddings]
    if missing:
        raise ConfigError("test_embeddings", f"every fold needs every seed; missing {missing[:5]}")
    return folds, seeds


def _as_split(value: Any, key: Any) -> tuple[Any, ...]:
    if not isinstance(value, (tuple, list)) or len(value) not in (2, 4):
        raise ConfigError(
            f"test_embeddings[{key}]",
            "expected (embeddings, labels) or (query, query_labels, gallery, gallery_labels)",
        )
    return tuple(value)


def _check_same_labels(splits: Mapping[Any, tuple[Any, ...]]) -> None:
    first_key, first = next(iter(splits.items()))
    for key, split in splits.items():
        if len(split) != len(first):
            raise ConfigError(
                f"test_embeddings[{key}]",
                f"mixes leave-one-out and query/gallery splits with {first_key}",
            )
        for pos in range(1, len(split), 2):
            if not np.array_equal(np.asarray(split[pos]), np.asarray(first[pos])):
                raise ConfigError(
                    f"test_embeddings[{key}]",
                    f"labels differ from those of {first_key}; embed the same test items in the same order",
                )


def _select(result: Mapping[str, Any], metrics: Sequence[str]) -> dict[str, float]:
    missing = [m for m in metrics if not isinstance(result.get(m), float)]
    if missing:
        raise ConfigError("metrics", f"{missing} are not scalar retrieval metrics")
    return {m: result[m] for m in metrics}
