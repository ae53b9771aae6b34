"""Embed new images with a trained run, from Python::

    from gspdml.retrieval import Encoder, RetrievalIndex

    encoder = Encoder.from_run("runs/own-images")
    vectors = encoder(["a.jpg", "b.png"])               # [2, D] float32, L2-normalised
    index = encoder.index("photos/")                     # every image under a folder
    index.save("photos.index")
    results = RetrievalIndex.load("photos.index").search(encoder(["query.jpg"]), k=5)

Images are decoded and preprocessed exactly as ``gspdml index``/``search`` do (the run's eval
transform, recorded in its ``config.yaml``: the training data need not be there); an
:class:`Encoder` also takes PIL images (decoded by the same rules as files: EXIF orientation,
alpha on white, 16-bit rescaled), or a tensor batch ``[B, C, H, W]`` that is already preprocessed.

An :class:`Encoder`, ``gspdml index``, ``search`` and ``report`` embed as the run's trainer did:
on the device asked (``auto``: the GPU when there is one), at the run's ``trainer.precision``
resolved once for that device (:func:`load_placed_run`), the weights in that precision's layout.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Union, cast

import torch
from PIL import Image

from gspdml.compat.hardware import PrecisionChoice, resolve_precision
from gspdml.config import RunConfig
from gspdml.errors import ConfigError
from gspdml.models import Embedder
from gspdml.models.inference import autocast_context, embed, placed, resolve_device
from gspdml.retrieval.build import build_index, model_info
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.preprocessing import (
    ImageTransform,
    eval_transform_from_config,
    load_model_input,
)
from gspdml.retrieval.sources import ImageFiles, folder_source
from gspdml.training import load_run


def image_channels(model: Embedder) -> int:
    """Input channels of an embedder (its backbone's first convolution)."""
    first = next(m for m in model.backbone.modules() if isinstance(m, torch.nn.Conv2d))
    return int(first.in_channels)


def load_model_and_transform(
    run_dir: str | os.PathLike[str], device: torch.device, weights: str = "final"
) -> tuple[RunConfig, Embedder, ImageTransform]:
    """``(config, model on device in eval mode, eval transform)`` of a run."""
    config, model = load_run(Path(run_dir), weights=weights)
    return (
        config,
        model.to(device).eval(),
        eval_transform_from_config(config, image_channels(model)),
    )


class PlacedRun(NamedTuple):
    """A run's embedder as its trainer held it: on ``device``, at the run's precision resolved
    there once (``trainer.precision``, :func:`~gspdml.compat.hardware.resolve_precision`), in
    that precision's layout (:func:`~gspdml.models.inference.placed`), in eval mode."""

    config: RunConfig
    model: Embedder
    transform: ImageTransform
    device: torch.device
    precision: PrecisionChoice


def load_placed_run(
    run_dir: str | os.PathLike[str], device: torch.device, weights: str = "final"
) -> PlacedRun:
    """The :class:`PlacedRun` of ``run_dir`` on ``device``."""
    config, model, transform = load_model_and_transform(run_dir, device, weights)
    precision = resolve_precision(config.trainer.precision, device)
    model = cast(Embedder, placed(model, device, precision).eval())
    return PlacedRun(config, model, transform, device, precision)


Images = Union[torch.Tensor, Sequence[Union[str, os.PathLike[str], Image.Image]]]


class Encoder:
    """A run's embedder with its eval transform (:meth:`from_run`); calling it embeds images."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        weights: str = "final",
        device: str = "auto",
        batch_size: int = 64,
    ):
        """The embedder of ``run_dir`` (``weights``: ``final`` or ``best``, see ``gspdml evaluate --help``)."""
        self.run_dir, self.batch_size = Path(run_dir), int(batch_size)
        run = load_placed_run(self.run_dir, resolve_device(device), weights)
        self.config, self.model, self.transform = run.config, run.model, run.transform
        self.device, self.precision = run.device, run.precision

    @classmethod
    def from_run(cls, *args: Any, **kwargs: Any) -> Encoder:
        """``Encoder(run_dir, weights, device, batch_size)``, by the name the README uses."""
        return cls(*args, **kwargs)

    @property
    def dim(self) -> int:
        return int(self.model.embedding_dim)

    def __call__(self, images: Images) -> torch.Tensor:
        """Embeddings ``[N, D]`` (float32, CPU) of image files, PIL images or a preprocessed batch."""
        if isinstance(images, torch.Tensor):
            with torch.no_grad(), autocast_context(self.precision, self.device):
                return torch.cat(
                    [
                        self.model(chunk.to(self.device)).embedding.float().cpu()
                        for chunk in images.split(self.batch_size)
                    ]
                )
        items = list(images)
        pictures = [item for item in items if isinstance(item, Image.Image)]
        files = [item for item in items if not isinstance(item, Image.Image)]
        if not files:
            return self(torch.stack([load_model_input(item, self.transform) for item in pictures]))
        if pictures:
            raise ConfigError(
                "images",
                f"{len(pictures)} PIL images among {len(files)} file "
                "paths; pass either image files or PIL images",
            )
        paths = [str(Path(item)) for item in files]
        vectors, _ = embed(
            self.model,
            ImageFiles(paths, [None] * len(paths), self.transform),
            self.batch_size,
            self.device,
            self.precision,
        )
        return vectors

    def index(
        self,
        folder: str | os.PathLike[str],
        metric: str = "euclidean",
        on_error: str = "raise",
        progress: bool = False,
    ) -> RetrievalIndex:
        """A :class:`RetrievalIndex` of every image under ``folder`` (labels: class sub-folders),
        as ``gspdml index RUN_DIR FOLDER`` builds it."""
        source = folder_source(folder, self.transform)
        return build_index(
            self.model,
            source,
            model_info(self.run_dir),
            metric,
            self.batch_size,
            self.device,
            progress,
            on_error,
            self.precision,
        )
