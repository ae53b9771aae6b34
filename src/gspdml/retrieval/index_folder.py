"""An index folder written from a run (``gspdml index``), and query images embedded for a search
of one (``gspdml search``): the policy around :func:`~gspdml.retrieval.build.build_index` and
:func:`~gspdml.retrieval.build.append_to_index`.

* **One writer**: the folder is locked (:class:`~gspdml.training.run_lock.FolderLock`).
* **No silent replacement**: an index is rebuilt only with ``overwrite``, grown with ``append``.
* **Append**: rows whose file is gone are dropped, only new images are embedded (by the same
  weights: checked), the approximate structure follows (:func:`~gspdml.retrieval.approximate.update_ann`).
* **Partial save**: when an image fails to decode (``on_error="raise"``) the images embedded
  before it are saved and the error says how to continue; a failed approximate build saves
  nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from gspdml.errors import ConfigError, DataError
from gspdml.models import Embedder
from gspdml.models.inference import embed, resolve_device
from gspdml.output_files import check_writable_folder
from gspdml.retrieval.approximate import AnnRequest, update_ann
from gspdml.retrieval.build import (
    append_to_index,
    build_index,
    check_same_model,
    drop_missing_files,
    find_index_run,
    model_info,
)
from gspdml.retrieval.embedding import PartialEmbedding
from gspdml.retrieval.encoder import load_placed_run
from gspdml.retrieval.index import RetrievalIndex, holds_index
from gspdml.retrieval.sources import ImageFiles, folder_source, skipped_notes, split_source
from gspdml.settings.sections import RunConfig
from gspdml.training.run_lock import FolderLock


@dataclass(frozen=True)
class IndexWritten:
    """A saved index, what was done (``done``: ``indexed N images`` or ``added ...``) and the
    line describing its approximate structure ('' without one)."""

    index: RetrievalIndex
    folder: Path
    done: str
    approximate: str

    def lines(self) -> list[str]:
        """The summary for the user: what was done, the folder's size, the approximate search."""
        index = self.index
        skipped = f", {len(index.skipped)} files skipped" if index.skipped else ""
        summary = f"{self.done}{skipped}; {self.folder}: {len(index)} vectors of dim {index.dim}"
        return [f"{summary}, metric {index.metric}", *filter(None, [self.approximate])]


def write_index(
    run_dir: str | Path,
    out: str | Path,
    images: Optional[str | Path] = None,
    split: Optional[str] = None,
    *,
    note: Callable[[str], None],
    append: bool = False,
    overwrite: bool = False,
    metric: str = "euclidean",
    batch_size: int = 64,
    device: str = "auto",
    progress: bool = True,
    on_error: str = "raise",
    approximate: Optional[AnnRequest] = None,
) -> IndexWritten:
    """Embed the images of the folder ``images`` (or the ``split`` of the run's dataset) with the
    run's model and save them as the index folder ``out`` (module docstring); ``note`` gets a
    line for each dropped row and each file left out; ``approximate``: the approximate structure
    asked (default: exact search only, or the index's own when appending)."""
    if (images is None) == (split is None):
        raise ConfigError(
            "images",
            "give either an IMAGES_DIR or --split (a split of the run's dataset), not both",
        )
    folder = Path(out)
    exists = holds_index(folder)
    if exists and not (append or overwrite):
        raise ConfigError(
            "--out",
            f"{folder} already holds an index; pass --append to add images or --overwrite to rebuild it",
        )
    if append and not exists:
        raise ConfigError("--append", f"{folder} holds no index to append to")
    check_writable_folder(folder)
    lock = FolderLock(folder, "gspdml index")  # one writer: a concurrent second one fails at once
    try:
        run = load_placed_run(run_dir, resolve_device(device))
        config, model, transform = run.config, run.model, run.transform
        if images is not None:
            source = folder_source(images, transform)
        else:
            source = split_source(config, str(split))
        info = {
            **model_info(run_dir),
            "run_dir_from_index": os.path.relpath(Path(run_dir).resolve(), folder.resolve()),
        }
        index = RetrievalIndex.load(folder) if append else None
        try:
            if index is not None:
                dropped = drop_missing_files(index)
                for path in dropped:
                    note(f"dropped {path}: the file no longer exists")
                added = append_to_index(
                    index,
                    model,
                    source,
                    info,
                    batch_size,
                    run.device,
                    progress,
                    on_error,
                    run.precision,
                )
                kept = len(source.paths) - added - len(index.skipped)
                done = f"added {added} images ({kept} already indexed, {len(dropped)} dropped)"
            else:
                index = build_index(
                    model,
                    source,
                    info,
                    metric,
                    batch_size,
                    run.device,
                    progress,
                    on_error,
                    run.precision,
                )
                done = f"indexed {len(index)} images"
        except PartialEmbedding as stop:
            saved = _keep_partial(index, stop, folder, metric, info)
            raise DataError(
                f"{stop}; {saved} images embedded before it are saved in {folder}: fix or remove the file (or pass "
                f"--on-error skip), then run the same command with --append to add the rest"
            ) from None
        for line in skipped_notes(source, index.skipped):
            note(line)
        line = update_ann(index, folder, approximate or AnnRequest(), append)  # before the save
        index.save(folder)
        return IndexWritten(index, folder, done, line)
    finally:
        lock.release()


def _keep_partial(
    index: Optional[RetrievalIndex],
    stop: PartialEmbedding,
    folder: Path,
    metric: str,
    info: dict[str, Any],
) -> int:
    """Save what was embedded before a failure (an appended index already holds it); its size."""
    if index is None:
        if stop.done is None:
            return 0
        done = stop.done
        index = RetrievalIndex(done.vectors, done.source.paths, done.source.labels, metric, info)
    index.save(folder)
    return len(index)


@dataclass(frozen=True)
class EmbeddedQueries:
    """Query images embedded for a search of an index: the index, the run that built it (its
    config, model and device) and the queries' resolved paths and embeddings ``[Q, D]``."""

    index: RetrievalIndex
    config: RunConfig
    model: Embedder
    device: torch.device
    paths: list[str]
    queries: torch.Tensor


def embed_queries(
    folder: str | Path,
    query_files: Sequence[str | Path],
    run: Optional[str | Path] = None,
    device: str = "auto",
    batch_size: int = 64,
) -> EmbeddedQueries:
    """Read the index in ``folder`` (memory-mapped) and embed ``query_files`` with the run that
    built it (``run``, else the one it records: :func:`~gspdml.retrieval.build.find_index_run`),
    whose weights must be those of the index."""
    index = RetrievalIndex.load(folder, mmap=True)
    run_dir = find_index_run(index, folder, run)
    check_same_model(index, model_info(run_dir))
    loaded = load_placed_run(run_dir, resolve_device(device))
    paths = [str(Path(p).resolve()) for p in query_files]
    for path in paths:
        if not Path(path).is_file():
            raise DataError(f"{path}: query image not found")
    files = ImageFiles(paths, [None] * len(paths), loaded.transform)
    queries, _ = embed(loaded.model, files, batch_size, loaded.device, loaded.precision)
    return EmbeddedQueries(index, loaded.config, loaded.model, loaded.device, paths, queries)
