"""The component specs of a run config, checked by their registries before any work.

Each spec's name must be registered and its options must fit the component's constructor (types
from its annotations, :mod:`gspdml.typecheck`). Poolings and losses are cheap to build: building
them here turns their own value checks (e.g. GSP's ``mu`` in (0, 1]) into errors before any data
is read or any model is built. The dataset spec is completed with the reader's defaults, so
``gspdml config`` and a run's ``config.yaml`` show every option in force, and its ``root`` /
``path`` are made absolute (a run is read back from anywhere).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Iterator
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
    from gspdml.losses import build_loss, check_loss
    from gspdml.models.backbones import BACKBONES
    from gspdml.pooling import POOLINGS, build_pooling

    DATASETS.check(config.data.dataset, "data.dataset")
    check_recipe(config.data.dataset, "data.dataset")
    BACKBONES.check(config.model.backbone, "model.backbone")
    POOLINGS.check(config.model.pooling, "model.pooling")
    check_loss(config.loss, "loss")
    check_vocabularies(config)
    dim = config.model.embedding_dim or 8
    with field_prefix("model.pooling"):
        build_pooling(config.model.pooling, in_channels=dim)
    terms = config.loss if isinstance(config.loss, list) else [config.loss]
    for i, term in enumerate(terms):
        where = f"loss[{i}]" if isinstance(config.loss, list) else "loss"
        with field_prefix(where, names="loss"):  # a loss names its options loss.<option>
            build_loss(term, where, embedding_dim=dim, num_classes=2)


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


@contextlib.contextmanager
def field_prefix(prefix: str, names: str = "") -> Iterator[None]:
    """Re-raise a component's own ConfigError with the config path in front of its field; a
    field the component names from ``names`` (``loss.class_init``) is moved under ``prefix``
    (``loss[1].class_init``, a term of a list)."""
    try:
        yield
    except ConfigError as exc:
        if names and prefix != names and (exc.field == names or exc.field.startswith(names + ".")):
            field = prefix + exc.field[len(names) :]
        elif exc.field.startswith(prefix):
            raise
        else:
            field = f"{prefix}.{exc.field}" if exc.field else prefix
        message = str(exc).split(": ", 1)[-1] if exc.field else str(exc)
        raise ConfigError(field, message) from exc.__cause__
