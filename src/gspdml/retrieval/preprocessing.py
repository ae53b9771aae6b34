"""Which evaluation transform a run's image files get before they meet the embedder.

Search must feed the model exactly what evaluation fed it, so the transform comes from the run;
it is built here, never implemented here: an
:class:`~gspdml.data.eval_transform.EvalTransform` spec (the one evaluation pipeline of
:mod:`gspdml.data`) or the dataset's own transform, in this order:

1. an explicit ``data.eval_transform`` (or ``data.transform``, whose ``eval`` entry wins when it
   has one) in the run config::

       data:
         eval_transform: {resize: 256, center_crop: 227, mean: [0.485, 0.456, 0.406],
                          std: [0.229, 0.224, 0.225], channels: 3}

   * ``resize``: an int resizes the shorter side to it (aspect kept, longer side truncated),
     ``[h, w]`` resizes exactly (bilinear, as torchvision's ``Resize``);
   * ``center_crop``: an int or ``[h, w]``; the top-left corner is ``round((H - h) / 2)``, as
     torchvision's ``CenterCrop``, and a smaller image is padded with black first;
   * ``mean`` / ``std``: per-channel ``(x * value_range - mean) / std`` of pixels x in [0, 1]
     (``value_range`` 1 by default, 255 for Caffe-style models), after reversing the channels
     when ``bgr: true`` (BN-Inception);
   * ``channels``: 1 (grey, e.g. the collage data) or 3 (RGB);
2. otherwise the evaluation transform of the run's dataset (``data.dataset``), read from its
   evaluation split (:func:`transform_from_dataset`): a dataset of image files lends its own
   ``transform``; an in-memory dataset of uint8 images normalised by scalar ``mean``/``std``
   (the collages) gives "resize to its image size, then normalise";
3. otherwise (no dataset in the config): pixels scaled to [0, 1], no resizing, no
   normalisation, and the channel count of the model's first layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import torch
from PIL import Image

from gspdml.data.eval_transform import EvalTransform, tensor_display
from gspdml.data.images import load_image
from gspdml.errors import ConfigError, DataError
from gspdml.training.run_dir import build_run_data

_KEYS = ("resize", "center_crop", "mean", "std", "channels", "bgr", "value_range")


def _size(value: Any, field: str, allow_int: bool) -> Optional[tuple[int, ...]]:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return (value,) if allow_int else (value, value)
    if isinstance(value, Sequence) and len(value) == 2 and all(isinstance(v, int) and v > 0 for v in value):
        return (int(value[0]), int(value[1]))
    raise ConfigError(field, f"expected a positive int or [height, width], got {value!r}")


@dataclass(frozen=True)
class DatasetTransform:
    """A dataset's own evaluation transform ``function(PIL image, generator) -> tensor`` (the
    convention of ``gspdml.data``), applied to image files converted to ``channels``."""

    function: Callable
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


def transform_from_dataset(dataset, in_channels: int) -> ImageTransform:
    """The transform that turns an image file into what ``dataset`` (an evaluation split) yields.

    * a dataset with a callable ``transform`` attribute (image files) lends it
      (:class:`DatasetTransform`);
    * a dataset with scalar ``mean``/``std`` attributes (uint8 arrays normalised as
      ``(x - mean) / std``, x in [0, 1]) gives a resize to the size of its images followed by
      that normalisation.
    """
    size = tuple(int(v) for v in dataset[0][0].shape[-2:])
    function = getattr(dataset, "transform", None)
    if callable(function):
        return DatasetTransform(function, in_channels, size)
    mean, std = getattr(dataset, "mean", None), getattr(dataset, "std", None)
    if isinstance(mean, (int, float)) and isinstance(std, (int, float)):
        return EvalTransform(in_channels, resize=size, mean=(float(mean),) * in_channels, std=(float(std),) * in_channels)
    raise ConfigError(
        "data.eval_transform",
        f"cannot tell how image files become the tensors of {type(dataset).__name__}; give the run config a "
        "'data.eval_transform' (see gspdml.retrieval.preprocessing)",
    )


def eval_transform_from_config(config: dict[str, Any], in_channels: int) -> ImageTransform:
    """The run's evaluation transform (module docstring, in that order); ``in_channels`` is the model's."""
    data = config.get("data") or {}
    field, spec = "data.eval_transform", data.get("eval_transform")
    if spec is None and data.get("transform") is not None:
        field, spec = "data.transform", data["transform"]
        if isinstance(spec, dict) and "eval" in spec:
            field, spec = "data.transform.eval", spec["eval"]
    if spec is None:
        if "dataset" not in data:
            return EvalTransform(channels=in_channels)
        splits = build_run_data(config)
        evaluation = splits.test or splits.val
        if evaluation is None:
            raise ConfigError("data.eval_transform", "the run's dataset has no evaluation split to take the transform from; give one")
        return transform_from_dataset(evaluation.query, in_channels)
    if not isinstance(spec, dict):
        raise ConfigError(field, f"expected a mapping with keys {', '.join(_KEYS)}, got {spec!r}")
    unknown = sorted(set(spec) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{field}.{unknown[0]}", f"unknown transform option; allowed: {', '.join(_KEYS)}")
    channels = int(spec.get("channels", in_channels))
    if channels != in_channels:
        raise ConfigError(f"{field}.channels", f"{channels} channels, but the model's first layer takes {in_channels}")
    mean, std = spec.get("mean"), spec.get("std")
    if (mean is None) != (std is None):
        raise ConfigError(f"{field}.{'std' if std is None else 'mean'}", "mean and std must be given together")
    if mean is not None:
        for name, values in (("mean", mean), ("std", std)):
            if len(values) != channels:
                raise ConfigError(f"{field}.{name}", f"expected {channels} values (one per channel), got {values!r}")
        if any(float(s) <= 0 for s in std):
            raise ConfigError(f"{field}.std", f"must be positive, got {std!r}")
    value_range = float(spec.get("value_range", 1.0))
    if not value_range > 0:
        raise ConfigError(f"{field}.value_range", f"must be positive, got {spec['value_range']!r}")
    return EvalTransform(
        channels=channels,
        resize=_size(spec.get("resize"), f"{field}.resize", allow_int=True),
        center_crop=_size(spec.get("center_crop"), f"{field}.center_crop", allow_int=False),
        mean=None if mean is None else tuple(float(v) for v in mean),
        std=None if std is None else tuple(float(v) for v in std),
        bgr=bool(spec.get("bgr", False)),
        value_range=value_range,
    )


def load_model_input(path: str | Path, transform: ImageTransform) -> torch.Tensor:
    """Decode one image file (``gspdml.data.images.load_image``: EXIF orientation, alpha on
    white, 16-bit rescaled) and apply ``transform``; a file that fails names itself."""
    image = load_image(path)
    try:
        return transform(image)
    except ValueError as err:
        raise DataError(f"{path}: {err}") from None
