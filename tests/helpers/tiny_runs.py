"""The smallest run that still has a protocol's folds: 8 training classes (4 folds of 6 + 2),
4 test classes, 16x16 digit collages, and a two-stage small CNN."""

from __future__ import annotations

from typing import Any


def tiny_collage_data(**dataset: Any) -> dict[str, Any]:
    """The ``data`` section: ``dataset`` options override the tiny collage's."""
    return {
        "dataset": {
            "name": "collage_digits",
            "tile_size": 8,
            "images_per_class": 4,
            "class_split": [8, 0, 4],
            "background_split": [4, 0, 3],
            **dataset,
        },
        "classes_per_batch": 3,
        "samples_per_class": 2,
    }


def tiny_model(**model: Any) -> dict[str, Any]:
    """The ``model`` section: a 6-D embedding on a two-stage small CNN (``model`` adds to it)."""
    return {
        "backbone": {"name": "small_cnn", "widths": [4, 8], "pool_after": [0]},
        "embedding_dim": 6,
        **model,
    }
