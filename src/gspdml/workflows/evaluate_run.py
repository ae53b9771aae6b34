"""Evaluate a finished run's weights (``gspdml evaluate``): on a split of its dataset, or on
labelled images decoded as the run was trained, with the run's own device, precision and
evaluation settings (what reproduces its ``results.json``), through the one evaluation service
(:func:`gspdml.evaluation.service.evaluate`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

from gspdml.data import build_data
from gspdml.errors import ConfigError, GspdmlError
from gspdml.evaluation.metric_registry import default_query_metrics
from gspdml.evaluation.service import EvalSpec, evaluate
from gspdml.models.inference import resolve_device
from gspdml.retrieval.encoder import image_channels
from gspdml.retrieval.preprocessing import eval_transform_from_config
from gspdml.retrieval.sources import evaluation_images
from gspdml.training import load_run

#: the split evaluated when neither a split nor images are given
DEFAULT_SPLIT = "test"


def labelled_images(
    split: Optional[str],
    images: Optional[str | Path] = None,
    query: Optional[str | Path] = None,
    gallery: Optional[str | Path] = None,
) -> dict[str, str]:
    """The labelled images to evaluate instead of a split of the run: ``{"images": PATH}``
    (leave-one-out) or ``{"query": PATH, "gallery": PATH}``; empty: a split. A combination
    that is neither is refused, naming the option."""
    given = {
        name: str(path)
        for name, path in (("images", images), ("query", query), ("gallery", gallery))
        if path
    }
    if given and split is not None:
        raise ConfigError(
            "--split", "give either --split or labelled images (--images, --query/--gallery)"
        )
    if "images" in given and len(given) > 1:
        raise ConfigError(
            "--images", "give either --images (leave-one-out) or --query and --gallery"
        )
    if len(given) == 1 and "images" not in given:
        missing = "--gallery" if "query" in given else "--query"
        raise ConfigError(missing, "--query and --gallery go together (query -> gallery retrieval)")
    return given


def evaluate_run(
    run_dir: str | Path,
    split: Optional[str] = None,
    images: Optional[str | Path] = None,
    query: Optional[str | Path] = None,
    gallery: Optional[str | Path] = None,
    *,
    note: Callable[[str], None],
    weights: str = "final",
    device: Optional[str] = None,
    metrics: Optional[Sequence[str]] = None,
    progress: bool = True,
) -> dict[str, Any]:
    """The metrics of the run's ``weights`` on ``split`` (default test) or on labelled
    ``images`` (or ``query`` and ``gallery``: :func:`labelled_images`), with a header naming
    what was evaluated; ``device`` None is the run's ``trainer.device``. ``metrics`` are computed
    besides the default ones and those of the run's config (the result's ``metrics`` lists what
    was computed and what was not). ``note`` gets what was done with repeated images."""
    given = labelled_images(split, images, query, gallery)
    config, model = load_run(run_dir, weights=weights)
    resolved = resolve_device(device or config.trainer.device)
    model = model.to(resolved)
    evaluation = config.evaluation
    named = tuple(metrics or ())
    spec = EvalSpec.from_evaluation(
        evaluation,
        metrics=(*default_query_metrics(), *evaluation.metrics, *named) if named else None,
    )
    seed, dataset = config.seed, config.data.dataset
    data = build_data(dataset, seed=seed) if spec.needs_training_embeddings or not given else None
    if given:
        transform = eval_transform_from_config(config, image_channels(model))
        chosen, report, notes = evaluation_images(given, transform)
        for line in notes:
            note(line)
        header: dict[str, Any] = {**given, **report}
    else:
        assert data is not None
        header = {"split": split or DEFAULT_SPLIT}
        chosen = getattr(data, header["split"])
        if chosen is None:
            name = config.data.dataset_name
            raise GspdmlError(f"dataset {name!r} has no {header['split']} split")
    result = evaluate(
        model,
        chosen,
        spec,
        device=resolved,
        precision=config.trainer.precision,
        batch_size=config.data.eval_batch_size,
        num_workers=config.data.num_workers,
        train_split=None if data is None else data.train,
        progress=progress,
    )
    header = {"run": str(run_dir), **header, "weights": weights}
    return {**header, **result.metrics, "metrics": spec.metrics_computed()}
