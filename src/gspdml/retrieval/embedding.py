"""Embed an :class:`ImageSource` for an index or a report, keeping the work already done.

Items are embedded in chunks. With ``on_error="skip"`` an item that fails to decode is left out
and named; with ``"raise"`` the first failure stops the work with :class:`PartialEmbedding`,
which carries the embeddings done before it (an index saves them; ``--append`` continues). A NaN
or infinite embedding (damaged weights, an overflow) stops the work with
:class:`NonFiniteEmbedding` naming the files, whatever ``on_error`` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from torch import nn
from torch.utils.data import Dataset

from gspdml.compat.hardware import Precision
from gspdml.errors import ConfigError, DataError, GspdmlError
from gspdml.models.inference import embed
from gspdml.progress import Progress
from gspdml.retrieval.sources import ImageSource

ON_ERROR = ("raise", "skip")
CHUNK_BATCHES = 8  # batches per chunk: what a late failure can cost at most


class _Positions(Dataset[tuple[Optional[torch.Tensor], int]]):
    """``(image, position)`` of chosen items of a dataset; a failing item is ``(None, position)``
    when skipping (its problem is kept in ``failed``)."""

    def __init__(self, dataset: Dataset[Any], items: list[int], skip: bool):
        self.dataset, self.items, self.skip = dataset, items, skip
        self.failed: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, j: int) -> tuple[Optional[torch.Tensor], int]:
        position = self.items[j]
        try:
            return self.dataset[position][0], position
        except DataError as error:
            if not self.skip:
                raise
            self.failed[position] = str(error)
            return None, position


@dataclass
class Embedded:
    """Embeddings of the items of ``source`` that decoded; ``skipped`` maps each left-out path to its problem."""

    vectors: torch.Tensor
    source: ImageSource
    skipped: dict[str, str] = field(default_factory=dict)


class PartialEmbedding(DataError):
    """A file failed (``on_error="raise"``); ``done`` holds what was embedded before it (or None)."""

    def __init__(self, error: DataError, done: Optional[Embedded]):
        self.done = done
        super().__init__(str(error))


class NonFiniteEmbedding(GspdmlError):
    """The model returned a NaN or infinite embedding."""


def _check_finite(vectors: torch.Tensor, positions: torch.Tensor, source: ImageSource) -> None:
    bad = (~torch.isfinite(vectors).all(dim=1)).nonzero().flatten()
    if len(bad):
        names = ", ".join(source.paths[int(positions[i])] for i in bad[:3])
        raise NonFiniteEmbedding(
            f"the model returned a NaN or infinite embedding for {len(bad)} of {len(vectors)} "
            f"images (e.g. {names}); its weights are damaged or it overflows in this precision: "
            "nothing was written; check the run's weights (gspdml evaluate) or use another run"
        )


def embed_source(
    model: nn.Module,
    source: ImageSource,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    progress: bool = True,
    on_error: str = "raise",
    items: Optional[list[int]] = None,
    precision: Precision = "fp32",
) -> Embedded:
    """Embed ``items`` (default: all) of ``source`` on ``device`` at ``precision`` (the run's,
    resolved by the caller: :class:`~gspdml.retrieval.encoder.PlacedRun`); see the module
    docstring."""
    if on_error not in ON_ERROR:
        raise ConfigError("--on-error", f"got {on_error!r}; allowed: {', '.join(ON_ERROR)}")
    items = list(range(len(source.paths))) if items is None else list(items)
    chunk = batch_size * CHUNK_BATCHES
    vectors: list[torch.Tensor] = []
    done: list[int] = []
    skipped: dict[str, str] = {}
    meter = Progress(f"embedding {len(items)} images", len(items), "images", enabled=progress)
    for start in range(0, len(items), chunk):
        part = _Positions(source.dataset, items[start : start + chunk], on_error == "skip")
        try:
            chunk_vectors, positions = embed(
                model, part, batch_size, device, precision=precision, progress=meter
            )
        except DataError as error:
            raise PartialEmbedding(
                error, _result(vectors, done, source, skipped) if done else None
            ) from None
        except ValueError:  # an empty result: every item of the chunk failed and was skipped
            if len(part.failed) != len(part):
                raise
        else:
            _check_finite(chunk_vectors, positions, source)
            vectors.append(chunk_vectors)
            done += positions.tolist()
        skipped.update({source.paths[i]: why for i, why in part.failed.items()})
        meter.update(len(part.failed))
    meter.close()
    if not done:  # every item failed and was skipped (or there were none)
        return Embedded(torch.empty(0, 0), source.subset([]), skipped)
    return _result(vectors, done, source, skipped)


def require_some(embedded: Embedded, what: str) -> Embedded:
    """``embedded``, unless no image could be embedded for ``what``."""
    if not embedded.source.paths:
        example = next(iter(embedded.skipped.values()), "no images")
        raise DataError(f"{what}: none of the images could be decoded (e.g. {example})")
    return embedded


def _result(
    vectors: list[torch.Tensor], done: list[int], source: ImageSource, skipped: dict[str, str]
) -> Embedded:
    return Embedded(torch.cat(vectors), source.subset(done), skipped)
