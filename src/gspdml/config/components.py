"""The component specs of a run config, checked by their registries before any work.

Each spec is checked by its registry (:meth:`gspdml.registry.Registry.check`) without building
it. The dataset spec is completed with the reader's defaults, so ``gspdml config`` and a run's
``config.yaml`` show every option in force, and its ``root`` / ``path`` are made absolute.
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path
from typing import Any

from gspdml.errors import ConfigError
from gspdml.settings.schema import plain

#: dataset options that name files or folders (stored absolute)
PATH_OPTIONS = ("root", "path")


def check_components(config: Any) -> None:
    """Check the dataset, backbone, pooling and loss specs of a :class:`RunConfig`."""
    # Imported here: the registries fill up as the packages are imported.
    from gspdml.data import DATASETS
    from gspdml.data.recipes import check_recipe
    from gspdml.losses import check_loss
    from gspdml.models.backbones import BACKBONES
    from gspdml.pooling import POOLINGS

    DATASETS.check(config.data.dataset, "data.dataset")
    check_recipe(config.data.dataset, "data.dataset")
    BACKBONES.check(config.model.backbone, "model.backbone")
    POOLINGS.check(config.model.pooling, "model.pooling")
    check_loss(config.loss, "loss")
    check_vocabularies(config)


def check_vocabularies(config: Any) -> None:
    """The run-config values whose vocabulary lives with a package above the run schema: the
    evaluation transform (``data``), the metric names and post-processing steps (``evaluation``)."""
    from gspdml.data.eval_transform import parse_eval_transform
    from gspdml.evaluation.metric_registry import check_metric_names
    from gspdml.evaluation.postprocess import parse_steps
    from gspdml.evaluation.selection import (
        SELECTION_METRICS,
        check_selection_metric,
        needs_clustering,
    )

    parse_eval_transform(config.data.eval_transform, "data.eval_transform")
    evaluation = config.evaluation
    check_selection_metric(evaluation.metric, "evaluation.metric")
    check_metric_names(evaluation.metrics, "evaluation.metrics")
    parse_steps(evaluation.postprocess, "evaluation.postprocess")
    if not evaluation.select_postprocessed:
        return
    field = "evaluation.select_postprocessed"
    if not evaluation.postprocess:
        raise ConfigError(
            field,
            "true needs post-processing steps in evaluation.postprocess "
            "(it selects by the post-processed metric)",
        )
    if needs_clustering(evaluation.metric):
        plain_metrics = ", ".join(m for m in SELECTION_METRICS if not needs_clustering(m))
        raise ConfigError(
            field,
            f"{evaluation.metric} clusters the plain embeddings, post-processing has no "
            f"clustering; select post-processed rounds by one of {plain_metrics}",
        )


def resolved_dataset(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the reader's defaults filled in and its paths made absolute (relative to the
    working directory)."""
    from gspdml.data import DATASETS

    resolved = copy.deepcopy(spec)
    DATASETS.get(spec["name"], "data.dataset")
    for param in DATASETS.options(spec["name"]):  # every factory gets the run's seed
        missing = param.name not in resolved and param.name != "seed"
        if missing and param.default is not inspect.Parameter.empty:
            resolved[param.name] = plain(param.default)  # YAML form: tuples as lists
    for key in PATH_OPTIONS:
        if isinstance(resolved.get(key), str):
            resolved[key] = str(Path(resolved[key]).expanduser().resolve())
    return resolved
