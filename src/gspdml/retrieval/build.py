"""Build an index from a run's model and a source of images, or grow one without re-embedding."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn

from gspdml.compat.hardware import Precision
from gspdml.errors import ConfigError
from gspdml.retrieval.embedding import PartialEmbedding, embed_source, require_some
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.sources import ImageSource
from gspdml.training.run_dir import CONFIG_FILE, weights_digest


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
    on_error: str = "raise",
    precision: Precision = "fp32",
) -> RetrievalIndex:
    """Embed every item of ``source`` that decodes (on ``device`` at ``precision``, the run's)
    and index it; the index's ``skipped`` names
    the files left out (``on_error="skip"``). A failure with ``"raise"`` is a
    :class:`~gspdml.retrieval.embedding.PartialEmbedding` holding the work done before it."""
    embedded = require_some(
        embed_source(model, source, batch_size, device, progress, on_error, precision=precision),
        "index",
    )
    index = RetrievalIndex(
        embedded.vectors, embedded.source.paths, embedded.source.labels, metric, info
    )
    index.skipped = embedded.skipped
    return index


def find_index_run(index: RetrievalIndex, folder: str | Path, given: Optional[str | Path]) -> Path:
    """The run directory of the index in ``folder``: ``given`` (``--run``), else the one it
    records, else the same run found relative to the index (both moved together); the weights
    are checked by the caller (:func:`check_same_model`)."""
    if given:
        return Path(given)
    recorded, relative = index.model.get("run_dir"), index.model.get("run_dir_from_index")
    candidates = [Path(recorded)] if recorded else []
    candidates += [Path(folder).resolve() / relative] if relative else []
    for candidate in candidates:
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    if not recorded:
        raise ConfigError(
            "--run", f"{folder} does not record its run directory; pass --run RUN_DIR"
        )
    raise ConfigError(
        "--run",
        f"the run that built {folder}, {recorded}, is gone (moved or deleted); pass "
        f"--run RUN_DIR with its new place (its weights are checked against the index)",
    )


def check_same_model(index: RetrievalIndex, info: dict[str, Any]) -> None:
    """Refuse to mix embeddings of different models in one index or one search."""
    if index.model.get("weights") != info["weights"]:
        raise ConfigError(
            "run_dir",
            f"the weights of {info['run_dir']} ({info['weights'][:19]}...) are not those that built the index "
            f"({str(index.model.get('weights'))[:19]}..., run {index.model.get('run_dir')!r})",
        )


def drop_missing_files(index: RetrievalIndex) -> list[str]:
    """Remove the rows whose file (an absolute path) no longer exists; returns their paths."""
    gone = [
        i
        for i, path in enumerate(index.paths)
        if Path(path).is_absolute() and not Path(path).exists()
    ]
    paths = [index.paths[i] for i in gone]
    index.remove(gone)
    return paths


def append_to_index(
    index: RetrievalIndex,
    model: nn.Module,
    source: ImageSource,
    info: dict[str, Any],
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    progress: bool = True,
    on_error: str = "raise",
    precision: Precision = "fp32",
) -> int:
    """Embed the items of ``source`` whose path is not in the index yet and add them; returns
    their number (the files left out are in ``index.skipped``). A :class:`PartialEmbedding` is
    raised after adding the items embedded before the failure, so saving the index keeps them."""
    check_same_model(index, info)
    known = set(index.paths)
    new = [i for i, path in enumerate(source.paths) if path not in known]
    if not new:
        return 0
    try:
        embedded = embed_source(
            model, source, batch_size, device, progress, on_error, items=new, precision=precision
        )
    except PartialEmbedding as stop:
        if stop.done is not None:
            index.add(stop.done.vectors, stop.done.source.paths, stop.done.source.labels)
        raise
    if embedded.source.paths:
        index.add(embedded.vectors, embedded.source.paths, embedded.source.labels)
    index.skipped = embedded.skipped
    return len(embedded.source.paths)
