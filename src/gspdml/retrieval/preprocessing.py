"""Which evaluation transform a run's image files get before they meet the embedder.

Search must feed the model what evaluation fed it, so the transform comes from the run (an
:class:`~gspdml.data.eval_transform.EvalTransform` spec or the dataset's own transform), in
this order:

1. the config's ``data.eval_transform``, which the trainer records, so that a run is read
   without its training data (:func:`gspdml.data.eval_transform.run_eval_transform`);
2. for a run written before that, the transform of the evaluation split of ``data.dataset``,
   rebuilt from the config (:func:`transform_from_splits`; needs the training data);
3. with no dataset in the config: pixels scaled to [0, 1], no resizing, no normalisation, and
   the channel count of the model's first layer.

Files and PIL images are decoded by :func:`gspdml.data.images.load_image` first, as the
datasets decode them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
import torch
from PIL import Image

from gspdml.data import DataSplits, build_data
from gspdml.data.eval_transform import (
    EvalTransform,
    dataset_eval_transform,
    parse_eval_transform,
    tensor_display,
)
from gspdml.data.images import decode_image, load_image
from gspdml.errors import ConfigError, DataError
from gspdml.settings.sections import RunConfig

#: how to make a run written before the trainer recorded its transform readable without its data
FIELD = "data.eval_transform"
RECORD_HINT = (
    "add data.eval_transform to the run's config.yaml (its options: "
    "gspdml.data.eval_transform), or train the run again with this version, "
    "which records it"
)


@dataclass(frozen=True)
class DatasetTransform:
    """A dataset's own evaluation transform ``function(PIL image, generator) -> tensor`` (the
    convention of ``gspdml.data``), applied to image files converted to ``channels``."""

    function: Callable[[Image.Image, torch.Generator], torch.Tensor]
    channels: int
    output_size: Optional[tuple[int, int]]

    def __call__(self, image: Image.Image) -> torch.Tensor:
        image = image.convert("L" if self.channels == 1 else "RGB")
        return self.function(image, torch.Generator().manual_seed(0))

    def to_display(self, tensor: torch.Tensor) -> np.ndarray:
        return tensor_display(tensor)

    def describe(self) -> dict[str, Any]:
        return {"dataset_transform": repr(self.function), "channels": self.channels}


ImageTransform = Union[EvalTransform, DatasetTransform]


def transform_from_splits(splits: DataSplits, in_channels: int) -> ImageTransform:
    """The transform that turns an image file into what the evaluation split of ``splits`` (test,
    else validation) yields: :func:`~gspdml.data.eval_transform.dataset_eval_transform`, else the
    dataset's own callable ``transform`` (:class:`DatasetTransform`)."""
    evaluation = splits.test or splits.val
    if evaluation is None:
        raise ConfigError(
            FIELD,
            f"the run's dataset has no evaluation split to take the transform from; {RECORD_HINT}",
        )
    dataset = evaluation.query
    described = dataset_eval_transform(dataset)
    if described is not None:
        return described
    function = getattr(dataset, "transform", None)
    if callable(function):
        height, width = (int(v) for v in dataset[0][0].shape[-2:])
        return DatasetTransform(function, in_channels, (height, width))
    raise ConfigError(
        FIELD,
        "cannot tell how image files become the tensors of "
        f"{type(dataset).__name__}; {RECORD_HINT}",
    )


def eval_transform_from_config(config: RunConfig, in_channels: int) -> ImageTransform:
    """The run's evaluation transform (module docstring, in that order); ``in_channels`` is the
    model's."""
    data = config.data
    return eval_transform_of(data.eval_transform, data.dataset, config.seed, in_channels)


def eval_transform_of(
    recorded: Optional[Mapping[str, Any]],
    dataset: Optional[Any],
    seed: int,
    in_channels: int,
) -> ImageTransform:
    """The evaluation transform of a run that recorded ``recorded`` (its
    ``data.eval_transform``, or None) and trained on ``dataset`` (its ``data.dataset`` spec,
    seeded with ``seed``; None: no dataset), in the order of the module docstring."""
    parsed = parse_eval_transform(recorded, FIELD, in_channels)
    if parsed is not None:
        return parsed
    if dataset is None:
        return EvalTransform(channels=in_channels)
    try:
        splits = build_data(dataset, seed=seed, field="data.dataset")
    except DataError as err:
        message = f"its dataset, rebuilt to find it, is unreadable ({err}); {RECORD_HINT}"
        raise ConfigError(FIELD, f"the run records no evaluation transform; {message}") from None
    transform = transform_from_splits(splits, in_channels)
    if transform.channels != in_channels:
        raise ConfigError(
            FIELD,
            f"the dataset's images have {transform.channels} channels, but "
            f"the model's first layer takes {in_channels}",
        )
    return transform


def load_model_input(
    item: str | os.PathLike[str] | Image.Image, transform: ImageTransform
) -> torch.Tensor:
    """Decode one image file (``gspdml.data.images.load_image``: EXIF orientation, alpha on
    white, 16-bit rescaled) or PIL image (the same rules) and apply ``transform``; a file that
    fails names itself."""
    shorter_side = getattr(transform, "decode_shorter_side", None)  # as the trainer read it
    image = decode_image(item) if isinstance(item, Image.Image) else load_image(item, shorter_side)
    try:
        return transform(image)
    except ValueError as err:
        raise DataError(f"{item}: {err}") from None
