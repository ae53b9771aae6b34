"""A row of a table of frozen pre-trained models as a pinned evaluation (``gspdml reproduce``'s
``frozen`` protocol, run by :mod:`gspdml.workflows.reproduce.frozen_run`).

A :class:`FrozenSpec` names what the paper evaluated: a released checkpoint (its file name and
where it is published), the backbone and the pooling it was trained with
(:func:`gspdml.models.simpool_release.released_embedder`). The file itself is given when the
table runs (``checkpoint=PATH`` or ``checkpoints=DIR``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from gspdml.errors import ConfigError
from gspdml.models.simpool_release import POOLINGS

if TYPE_CHECKING:
    from gspdml.models.embedder import Embedder


@dataclass(frozen=True)
class FrozenSpec:
    """One row's model: ``checkpoint`` (the released file's name, published at ``url``) loaded
    into ``backbone`` (``resnet50`` or ``vit``) with ``pooling`` (``gap``, ``cls`` or ``simpool``
    with ``gamma``); ``pooled_norm``: the ViT's final LayerNorm normalises the pooled vector
    instead of the tokens (the DINO SimPool ViT)."""

    checkpoint: str
    url: str
    pooling: str
    backbone: str = "resnet50"
    gamma: Optional[float] = 2.0
    pooled_norm: bool = False

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r}; choose one of {POOLINGS}")

    def describe(self) -> str:
        """What runs, in a few words: ``resnet50 + simpool γ=2, resnet50_dino_simpool_ep100.pth``."""
        pooling = self.pooling
        if pooling == "simpool" and self.gamma is not None:
            pooling += f" γ={self.gamma:g}"
        if self.pooled_norm:
            pooling += " + final LayerNorm"
        return f"{self.backbone} + {pooling}, {self.checkpoint}"

    def result_stem(self) -> str:
        """The start of the names of this model's result files: the released file's name up to
        its first dot, and the pooling (``resnet50_dino_simpool_ep100-simpool``)."""
        return f"{Path(self.checkpoint).name.split('.')[0]}-{self.pooling}"

    def embedder(self, file: Path, any_size: bool = False) -> Embedder:
        """This model read from ``file`` (:func:`gspdml.models.simpool_release.released_embedder`;
        ``any_size``: a ViT's position embeddings interpolated to each image's grid)."""
        from gspdml.models import simpool_release

        return simpool_release.released_embedder(
            file,
            self.pooling,
            backbone=self.backbone,
            gamma=self.gamma,
            pooled_norm=self.pooled_norm,
            any_size=any_size,
        )

    def given_file(self, file: Optional[Path], row: str, use: str = "evaluates") -> Path:
        """``file``, the checkpoint given for this model, or a ConfigError saying which file
        ``row`` (``"row R of TABLE"``) ``use``-s (evaluates, fine-tunes) and how to give it."""
        if file is None or not file.is_file():
            given = "" if file is None else f"{file} does not exist; "
            raise ConfigError(
                "checkpoint",
                f"{row} {use} the released {self.checkpoint}: {given}download it from "
                f"{self.url} and give checkpoints=DIR (the folder holding it) or "
                "checkpoint=PATH, or leave the row out with --rows",
            )
        return file
