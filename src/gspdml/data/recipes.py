"""The image pipelines of the papers and each backbone's input normalisation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from gspdml.data.base import spec_options
from gspdml.data.eval_transform import MAX_SIDE, EvalTransform
from gspdml.data.transforms import (
    Compose,
    Normalize,
    RandomErasing,
    RandomHorizontalFlip,
    RandomResizedCrop,
    Resize,
    ToTensor,
)
from gspdml.errors import ConfigError

#: the per-channel RGB mean and std of ImageNet, in [0, 1] (torchvision's pretrained models)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: the BGR mean, in [0, 255], that BN-Inception's Caffe weights expect
CAFFE_BGR_MEAN = (104.0, 117.0, 128.0)

NORMALIZATIONS: dict[str, dict[str, Any]] = {
    "imagenet": dict(mean=IMAGENET_MEAN, std=IMAGENET_STD),
    "bn_inception": dict(mean=CAFFE_BGR_MEAN, std=(1.0, 1.0, 1.0), bgr=True, value_range=255.0),
    "none": dict(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0)),
}

# (resize, crop, train-time RandomResizedCrop scale, resize before the random crop)
RECIPES = {
    # MLRC / Musgrave et al. (Gürbüz thesis §3.3.2.1: "random crop between 40 and 256", read as): train Resize(256) ->
    # RandomResizedCrop(227, scale=(0.16, 1), ratio=(3/4, 4/3)) -> flip; eval Resize(256) -> CenterCrop(227)
    "mlrc": (256, 227, (0.16, 1.0), True),
    # ProxyNCA++ (ProxyNCA++ paper §4.1; the authors' code, github.com/euwern/proxynca_pp): train RandomResizedCrop(256,
    # scale=(0.08, 1)) -> flip; eval Resize(288) -> CenterCrop(256)
    "proxynca": (288, 256, (0.08, 1.0), False),
    # LIBC (the authors' code, github.com/dvl-tum/intra_batch, transform GL_orig_RE): train
    # RandomResizedCrop(227, scale=(0.08, 1)) -> flip -> normalise -> random erasing
    # (AFTER_NORMALIZATION); eval Resize(256) -> CenterCrop(227)
    "libc": (256, 227, (0.08, 1.0), False),
    # no augmentation: Resize -> CenterCrop for training too (small images, debugging)
    "center": (256, 227, None, True),
}

#: train-time steps after the normalisation, per recipe
AFTER_NORMALIZATION: dict[str, list[Callable[..., Any]]] = {
    # the LIBC code's RandomErasing: p 0.5, area (0.02, 0.4), aspect from 0.3, filled with the
    # constants (0.4914, 0.4822, 0.4465) in normalised units
    "libc": [RandomErasing(0.5, (0.02, 0.4), 0.3, (0.4914, 0.4822, 0.4465))],
}


@dataclass(frozen=True)
class ImageRecipe:
    """The image options of an image dataset (:func:`image_transform`'s): the ``transform``
    recipe, the backbone's ``normalization`` and the ``resize``/``crop`` overrides."""

    transform: str = "mlrc"
    normalization: str = "imagenet"
    resize: Optional[int] = None
    crop: Optional[int] = None

    @classmethod
    def of_spec(cls, spec: Mapping[str, Any]) -> Optional[ImageRecipe]:
        """The recipe a ``data.dataset`` spec names; None for a dataset without one (no
        ``transform`` option: arrays, features)."""
        return spec_options(cls, spec) if "transform" in spec else None

    @property
    def size(self) -> int:
        """The side of the square images it trains on: ``crop``, else the recipe's crop."""
        return self.crop or RECIPES[self.transform][1]


def image_transform(
    recipe: str = ImageRecipe.transform,
    train: bool = False,
    normalization: str = ImageRecipe.normalization,
    resize: int | None = None,
    crop: int | None = None,
    field: str = "data.dataset",
) -> Compose | EvalTransform:
    """The transform of ``recipe`` (see :data:`RECIPES`) for training or evaluation, ending in
    ``ToTensor`` and the backbone's ``normalization`` (:data:`NORMALIZATIONS`); the evaluation
    transform is an :class:`gspdml.data.eval_transform.EvalTransform` (so a run can record it as
    its spec). ``resize`` and ``crop`` override the recipe's sizes (e.g. 73/64 for fast CPU
    runs), at most :data:`~gspdml.data.eval_transform.MAX_SIDE` pixels: the evaluation transform
    they make is recorded in a run's ``config.yaml`` as ``data.eval_transform``, which is read
    back with that bound."""
    if recipe not in RECIPES:
        raise ConfigError(
            f"{field}.transform", f"unknown recipe {recipe!r}; allowed: {', '.join(RECIPES)}"
        )
    if normalization not in NORMALIZATIONS:
        raise ConfigError(
            f"{field}.normalization",
            f"unknown normalization {normalization!r}; allowed: {', '.join(NORMALIZATIONS)}",
        )
    for option, size in (("resize", resize), ("crop", crop)):
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(
                f"{field}.{option}", f"must be a positive integer (pixels), got {size!r}"
            )
        if size is not None and size > MAX_SIDE:
            raise ConfigError(
                f"{field}.{option}",
                f"{size} pixels is larger than {MAX_SIDE}, the largest side of "
                "data.eval_transform, as which the run records its evaluation transform (each "
                f"image is allocated at that size); use at most {MAX_SIDE} pixels",
            )
    default_resize, default_crop, scale, resize_first = RECIPES[recipe]
    resize, crop = int(resize or default_resize), int(crop or default_crop)
    if not (train and scale is not None):
        return EvalTransform(
            3, resize=(resize,), center_crop=(crop, crop), **NORMALIZATIONS[normalization]
        )
    steps: list[Callable[..., Any]] = [Resize(resize)] if resize_first else []
    steps += [RandomResizedCrop(crop, scale, (3 / 4, 4 / 3)), RandomHorizontalFlip(0.5)]
    steps += [ToTensor(), Normalize(**NORMALIZATIONS[normalization])]
    return Compose(steps + AFTER_NORMALIZATION.get(recipe, []))


def check_recipe(spec: Mapping[str, Any], field: str = "data.dataset") -> None:
    """Build the training and evaluation transforms an image dataset's spec names
    (:class:`ImageRecipe`; cheap, no file is read), so an unknown recipe or normalization fails
    when the config is loaded (``gspdml config`` included), with the message the reader would
    give later. Specs without ``transform`` (arrays, features) pass."""
    recipe = ImageRecipe.of_spec(spec)
    if recipe is not None:
        for train in (True, False):
            image_transform(
                recipe.transform, train, recipe.normalization, recipe.resize, recipe.crop, field
            )
