"""Build an index from a run's model and a source of images, or grow one without re-embedding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from gspdml.errors import ConfigError
from gspdml.retrieval.images import ImageSource
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.run import weights_digest
from gspdml.training.inference import embed


def model_info(run_dir: str | Path) -> dict[str, Any]:
    """What an index records about the model that embedded it."""
    return {"run_dir": str(Path(run_dir).resolve()), "weights": weights_digest(run_dir)}


def build_index(
    model: nn.Module,
    source: ImageSource,
    info: dict[str, Any],
    metric: str = "euclidean",
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    progress: bool = True,
) -> RetrievalIndex:
    """Embed every item of ``source`` and index it."""
    vectors, _ = embed(model, source.dataset, batch_size, device, progress=progress)
    return RetrievalIndex(vectors, source.paths, source.labels, metric, info)


def check_same_model(index: RetrievalIndex, info: dict[str, Any]) -> None:
    """Refuse to mix embeddings of different models in one index or one search."""
    if index.model.get("weights") != info["weights"]:
        raise ConfigError(
            "run_dir",
            f"the weights of {info['run_dir']} ({info['weights'][:19]}...) are not those that built the index "
            f"({str(index.model.get('weights'))[:19]}..., run {index.model.get('run_dir')!r})",
        )


def append_to_index(
    index: RetrievalIndex,
    model: nn.Module,
    source: ImageSource,
    info: dict[str, Any],
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    progress: bool = True,
) -> int:
    """Embed only the items of ``source`` whose path is not in the index yet and add them.

    Returns the number of items added. The rows already in the index are not recomputed.
    """
    check_same_model(index, info)
    known = set(index.paths)
    new = [i for i, path in enumerate(source.paths) if path not in known]
    if not new:
        return 0
    subset = torch.utils.data.Subset(source.dataset, new)
    vectors, _ = embed(model, subset, batch_size, device, progress=progress)
    index.add(vectors, [source.paths[i] for i in new], [source.labels[i] for i in new])
    return len(new)
