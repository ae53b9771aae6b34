"""What a run is trained and selected on, in words: the split printed at the start of every run,
and the check that a validation split can rank at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from gspdml.data.base import DataSplits, EvalSplit, LabelledDataset

#: a split that selects a model must rank: at least this many classes with two or more images
MIN_RANKING_CLASSES = 2


def _count(dataset: LabelledDataset) -> str:
    labels = np.asarray(dataset.labels)
    return f"{len(np.unique(labels))} classes, {len(labels)} images"


def describe_split(split: Optional[EvalSplit]) -> str:
    if split is None:
        return "none"
    if split.gallery is None:
        return f"{_count(split.query)} (leave-one-out)"
    return f"query {_count(split.query)}, gallery {_count(split.gallery)}"


def describe_splits(data: DataSplits) -> list[str]:
    """One line per split (classes and images), then the data's own notes (what was skipped)."""
    return [
        f"train: {_count(data.train)}",
        f"val: {describe_split(data.val)}",
        f"test: {describe_split(data.test)}",
        *data.notes,
    ]


def ranking_problem(split: EvalSplit) -> Optional[str]:
    """Why retrieval metrics of ``split`` cannot tell models apart (None when they can): fewer
    than :data:`MIN_RANKING_CLASSES` classes with a second image, so every query either has no
    relevant item or has only relevant items (MAP@R is then 1.0 or undefined for every model)."""
    labels = np.asarray(split.query.labels if split.gallery is None else split.gallery.labels)
    classes, counts = np.unique(labels, return_counts=True)
    usable = int((counts >= (2 if split.gallery is None else 1)).sum())
    if usable >= MIN_RANKING_CLASSES and len(classes) >= 2:
        return None
    return (
        f"{len(classes)} classes and {len(labels)} images, {usable} class(es) with a query that has a relevant "
        f"item; retrieval metrics need at least {MIN_RANKING_CLASSES}"
    )


def scorable_queries(split: EvalSplit) -> int:
    """How many queries of ``split`` have a relevant reference (another image of their class:
    leave-one-out without a gallery, in the gallery otherwise); retrieval metrics are undefined
    when none has (:class:`gspdml.evaluation.metrics.NoQueryToScore`)."""
    queries = np.asarray(split.query.labels)
    if split.gallery is None:
        classes, counts = np.unique(queries, return_counts=True)
        return int(counts[counts >= 2].sum())
    return int(np.isin(queries, np.asarray(split.gallery.labels)).sum())


def image_size_note(dataset: LabelledDataset, spec: Mapping[str, Any]) -> Optional[str]:
    """The size images are trained at, next to the size of the first training image, for
    file-based datasets (a 28-px image trained at 227 px costs 60x the compute for nothing)."""
    from gspdml.data.recipes import ImageRecipe

    paths, recipe = getattr(dataset, "paths", None), ImageRecipe.of_spec(spec)
    if not paths or recipe is None:
        return None
    from PIL import Image

    size = recipe.size
    try:
        with Image.open(paths[0]) as image:
            width, height = image.size
    except OSError:
        return None
    note = f"images: trained at {size}x{size} px (data.dataset.crop); the first training image is {width}x{height} px"
    if size > 2 * max(width, height):
        note += " - upscaled: set data.dataset.resize and crop near your images' size to train much faster"
    return note
