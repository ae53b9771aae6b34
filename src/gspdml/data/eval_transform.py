"""The evaluation transform: one deterministic image -> tensor pipeline, described by a spec.

``EvalTransform(channels, resize, center_crop, mean, std, bgr, value_range)`` maps a PIL image
to a float tensor ``[C, H, W]`` with the steps of :mod:`gspdml.data.transforms`, in this order:

1. convert to ``channels`` (1: grey ``L``, 3: ``RGB``);
2. ``resize``: ``(s,)`` makes the shorter side ``s`` (aspect kept, longer side truncated),
   ``(h, w)`` resizes exactly (bilinear, as torchvision's ``Resize``);
3. ``center_crop`` ``(h, w)``: top-left corner ``round((H - h) / 2)``, ``round((W - w) / 2)``,
   an image smaller than the crop padded with black first (as torchvision's ``CenterCrop``);
4. pixels x to [0, 1], channels reversed when ``bgr`` (Caffe's BN-Inception), then
   ``(x · value_range - mean) / std`` per channel when ``mean``/``std`` are given.

The evaluation recipes of :func:`gspdml.data.recipes.image_transform`, the transform a retrieval
run applies to image files (:mod:`gspdml.retrieval.preprocessing`) and the one an exported bundle
records (``preprocessing.json``) are all this spec; CLIP's preprocessing
(:func:`gspdml.cir.backends.clip_preprocess`) is the same steps with bicubic resizing.

The spec is the config key ``data.eval_transform`` (:func:`parse_eval_transform`, the one check
of it, for a config, a received run's ``config.yaml`` and a bundle's ``preprocessing.json``;
``channels`` defaults to the model's, else the length of ``mean``, else 3; ``resize`` and
``center_crop`` at most :data:`MAX_SIDE` pixels a side), e.g.::

    data:
      eval_transform: {resize: 256, center_crop: 227, mean: [...], std: [...], channels: 3}

Null (the default) means the evaluation transform of the run's dataset; the trainer records it in
the run's ``config.yaml`` (:func:`run_eval_transform`), so that a run embeds image files as its
evaluation did without its training data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Optional, cast, overload

import numpy as np
import torch
from PIL import Image

from gspdml.data.base import DataSplits, LabelledDataset
from gspdml.data.transforms import CenterCrop, Compose, Normalize, Resize, ToTensor
from gspdml.errors import ConfigError

#: the keys of a spec (the fields of :class:`EvalTransform`)
KEYS = ("channels", "resize", "center_crop", "mean", "std", "bgr", "value_range")
#: the largest ``resize`` or ``center_crop`` side, in pixels: every image is allocated at the size
#: the transform makes when it is embedded (a side of 60,000 pixels is about 14 GB of pixels an
#: image, 8192 at most 805 MB as float32 RGB); a shorter side of ``resize`` makes the longer one
#: larger still
MAX_SIDE = 8192


@dataclass(frozen=True)
class EvalTransform:
    """PIL image -> float tensor ``[C, H, W]``; see the module docstring for the steps."""

    channels: int
    resize: Optional[tuple[int, ...]] = None  # (shorter_side,) or (h, w)
    center_crop: Optional[tuple[int, int]] = None
    mean: Optional[tuple[float, ...]] = None
    std: Optional[tuple[float, ...]] = None
    bgr: bool = False
    value_range: float = 1.0

    @property
    def decode_shorter_side(self) -> Optional[int]:
        """The shorter side of ``resize: (s,)``, for a reduced-size JPEG decode
        (:func:`gspdml.data.images.load_image`); None for an exact resize or none."""
        return self.resize[0] if self.resize is not None and len(self.resize) == 1 else None

    def __post_init__(self) -> None:
        if (self.mean is None) != (self.std is None):
            raise ConfigError(
                "eval_transform",
                f"mean and std must be given together, got mean={self.mean!r}, std={self.std!r}",
            )

    @property
    def output_size(self) -> Optional[tuple[int, int]]:
        """``(h, w)`` of every output when the transform fixes it, else None."""
        if self.center_crop is not None:
            return self.center_crop
        if self.resize is not None and len(self.resize) == 2:
            return (self.resize[0], self.resize[1])
        return None

    @cached_property
    def pipeline(self) -> Compose:
        """Steps 2 to 4 as seeded transforms ``(x, generator) -> x`` of :mod:`gspdml.data.transforms`."""
        steps: list[Callable[..., Any]] = []
        if self.resize is not None:
            steps.append(Resize(self.resize[0] if len(self.resize) == 1 else self.resize))
        if self.center_crop is not None:
            steps.append(CenterCrop(self.center_crop))
        steps.append(ToTensor())
        if self.mean is not None and self.std is not None:  # both or neither (__post_init__)
            steps.append(Normalize(self.mean, self.std, bgr=self.bgr, value_range=self.value_range))
        elif self.bgr:
            steps.append(Normalize((0.0,) * self.channels, (1.0,) * self.channels, bgr=True))
        return Compose(steps)

    def __call__(
        self, image: Image.Image, generator: Optional[torch.Generator] = None
    ) -> torch.Tensor:
        mode = "L" if self.channels == 1 else "RGB"
        image = image if image.mode == mode else image.convert(mode)  # no copy when it is
        return cast(torch.Tensor, self.pipeline(image, generator))

    def describe(self) -> dict[str, Any]:
        """The spec (plain lists, as YAML and JSON write it), read back by
        :func:`parse_eval_transform`."""
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in dataclasses.asdict(self).items()
        }

    def to_display(self, tensor: torch.Tensor) -> np.ndarray:
        """Invert the normalisation: model input ``[C, H, W]`` -> image ``[H, W, C]`` in [0, 1]."""
        image = tensor.detach().float().cpu()
        if self.mean is not None:
            image = (
                image * torch.tensor(self.std).view(-1, 1, 1)
                + torch.tensor(self.mean).view(-1, 1, 1)
            ) / self.value_range
        if self.bgr:
            image = image.flip(0)
        return display_range(image.permute(1, 2, 0).numpy())


def tensor_display(tensor: torch.Tensor) -> np.ndarray:
    """A model input ``[C, H, W]`` of unknown normalisation as a picture ``[H, W, C]`` in [0, 1]
    (:func:`display_range`)."""
    return display_range(tensor.detach().float().cpu().permute(1, 2, 0).numpy())


def display_range(image: np.ndarray) -> np.ndarray:
    """Images already in [0, 1] are kept; others (tensors of unknown normalisation) are min-max scaled."""
    low, high = float(image.min()), float(image.max())
    if low >= 0.0 and high <= 1.0:
        return image
    return (image - low) / max(high - low, 1e-12)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _size(value: Any, field: str, shorter_side: bool) -> Optional[tuple[int, ...]]:
    """A size option: an int (``resize``: the shorter side, ``(s,)``; ``center_crop``: a square),
    ``[s]`` (``resize`` only) or ``[h, w]``."""
    if value is None:
        return None
    if _positive_int(value):
        return (value,) if shorter_side else (value, value)
    lengths = (1, 2) if shorter_side else (2,)
    if isinstance(value, (list, tuple)) and len(value) in lengths:
        if all(map(_positive_int, value)):
            return tuple(int(v) for v in value)
    allowed = (
        "a positive int, [size] or [height, width]"
        if shorter_side
        else "a positive int or [height, width]"
    )
    raise ConfigError(field, f"expected {allowed}, got {value!r}")


def _check_sides(
    field: str, resize: Optional[tuple[int, ...]], crop: Optional[tuple[int, int]]
) -> None:
    """Refuse a ``resize`` or ``center_crop`` larger than :data:`MAX_SIDE` pixels a side."""
    sizes = {"resize": resize, "center_crop": crop}
    large = [
        f"{name} {list(size)}" for name, size in sizes.items() if size and max(size) > MAX_SIDE
    ]
    if large:
        raise ConfigError(
            field,
            f"{', '.join(large)} makes images larger than {MAX_SIDE} pixels a side (each image "
            f"is allocated at that size when it is embedded); use sizes of at most {MAX_SIDE} pixels",
        )


def _per_channel(values: Any, name: str, count: int, field: str) -> tuple[float, ...]:
    numbers = isinstance(values, (list, tuple)) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    )
    if not numbers or len(values) != count:
        raise ConfigError(
            f"{field}.{name}", f"expected {count} numbers (one per channel), got {values!r}"
        )
    return tuple(float(v) for v in values)


@overload
def parse_eval_transform(
    spec: dict[str, Any], field: str = ..., channels: Optional[int] = ...
) -> EvalTransform: ...


@overload
def parse_eval_transform(
    spec: Any, field: str = ..., channels: Optional[int] = ...
) -> Optional[EvalTransform]: ...


def parse_eval_transform(
    spec: Any, field: str = "data.eval_transform", channels: Optional[int] = None
) -> Optional[EvalTransform]:
    """The :class:`EvalTransform` of a spec (module docstring), None for None; every problem is a
    :class:`ConfigError` naming ``field`` and the option. ``channels``: the model's input channels
    when known (a spec with other channels is refused)."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ConfigError(
            field, f"expected null or a mapping with keys {', '.join(KEYS)}, got {spec!r}"
        )
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        raise ConfigError(
            f"{field}.{unknown[0]}", f"unknown transform option; allowed: {', '.join(KEYS)}"
        )
    return _checked(field, channels, **spec)


#: ``channels`` not given: the model's, else the length of ``mean``, else 3
_CHANNELS_UNSET: Any = object()


def _checked(
    field: str,
    model_channels: Optional[int],
    *,
    channels: Any = _CHANNELS_UNSET,
    resize: Any = EvalTransform.resize,
    center_crop: Any = EvalTransform.center_crop,
    mean: Any = EvalTransform.mean,
    std: Any = EvalTransform.std,
    bgr: Any = EvalTransform.bgr,
    value_range: Any = EvalTransform.value_range,
) -> EvalTransform:
    """The :class:`EvalTransform` of a spec's options (the keywords, as given), each checked."""
    if (mean is None) != (std is None):
        missing = "std" if std is None else "mean"
        raise ConfigError(f"{field}.{missing}", "mean and std must be given together")
    if channels is _CHANNELS_UNSET:
        default = len(mean) if isinstance(mean, (list, tuple)) else 3
        channels = default if model_channels is None else model_channels
    if not _positive_int(channels) or channels not in (1, 3):
        raise ConfigError(f"{field}.channels", f"expected 1 (grey) or 3 (RGB), got {channels!r}")
    if model_channels is not None and channels != model_channels:
        raise ConfigError(
            f"{field}.channels",
            f"{channels} channels, but the model's first layer takes {model_channels}",
        )
    means: Optional[tuple[float, ...]] = None
    stds: Optional[tuple[float, ...]] = None
    if mean is not None:
        means, stds = (
            _per_channel(values, name, channels, field)
            for name, values in (("mean", mean), ("std", std))
        )
        if min(stds) <= 0:
            raise ConfigError(f"{field}.std", f"must be positive, got {std!r}")
    if not _positive_number(value_range):
        raise ConfigError(
            f"{field}.value_range", f"expected a positive number, got {value_range!r}"
        )
    if not isinstance(bgr, bool):
        raise ConfigError(f"{field}.bgr", f"expected true or false, got {bgr!r}")
    shorter = _size(resize, f"{field}.resize", shorter_side=True)
    # a crop is always (h, w): _size with shorter_side=False returns pairs only
    crop = cast(
        Optional[tuple[int, int]],
        _size(center_crop, f"{field}.center_crop", shorter_side=False),
    )
    _check_sides(field, shorter, crop)
    return EvalTransform(channels, shorter, crop, means, stds, bgr, float(value_range))


def dataset_eval_transform(dataset: LabelledDataset) -> Optional[EvalTransform]:
    """The :class:`EvalTransform` that turns a decoded image file into what ``dataset`` (an
    evaluation split) yields, or None when it cannot be described as one:

    * a dataset of image files whose ``transform`` is an :class:`EvalTransform` (the readers of
      :mod:`gspdml.data.image_splits`: image folders, CSV lists, CUB, Cars, SOP, In-Shop) lends it;
    * a dataset without a ``transform`` whose items are uint8 pixels normalised by scalar
      ``mean``/``std`` as ``(x - mean) / std`` (:class:`~gspdml.data.arrays.ArrayDataset`: the
      collages, Fashion-MNIST) gives "resize to the size of its images, then normalise".
    """
    transform = getattr(dataset, "transform", None)
    if transform is not None:
        return transform if isinstance(transform, EvalTransform) else None
    mean, std = getattr(dataset, "mean", None), getattr(dataset, "std", None)
    if not (isinstance(mean, (int, float)) and isinstance(std, (int, float))):
        return None
    channels, height, width = (int(v) for v in dataset[0][0].shape[-3:])
    return EvalTransform(
        channels,
        resize=(height, width),
        mean=(float(mean),) * channels,
        std=(float(std),) * channels,
    )


def run_eval_transform(
    spec: Any, splits: DataSplits, field: str = "data.eval_transform"
) -> Optional[dict[str, Any]]:
    """What a run records as ``data.eval_transform`` in its ``config.yaml``: the evaluation
    transform of its dataset (:func:`dataset_eval_transform` of the test split, else the
    validation split), or the config's own ``spec`` where the dataset's cannot be described;
    None when neither exists. A spec that contradicts the dataset's transform is refused: the
    run is evaluated with the dataset's, and search must embed as evaluation did."""
    given = parse_eval_transform(spec, field, splits.channels)
    evaluation = splits.test or splits.val
    own = dataset_eval_transform(evaluation.query) if evaluation is not None else None
    if given is not None and own is not None and given != own:
        raise ConfigError(
            field,
            f"{spec!r} differs from the evaluation transform of "
            f"data.dataset, {own.describe()}, with which the run is "
            "evaluated; leave it null (the trainer records the dataset's), "
            "or change the dataset's options (resize, crop, normalization)",
        )
    chosen = own if own is not None else given
    return None if chosen is None else chosen.describe()
