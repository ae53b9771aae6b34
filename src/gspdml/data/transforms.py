"""Seeded transforms: every random transform is ``transform(x, generator) -> x``.

Tensor transforms (collages) and PIL image transforms (photographs; no torchvision needed); the
recipes of the papers are assembled in :mod:`gspdml.data.recipes`, and the deterministic
evaluation transform (resize, centre crop, normalise) in :mod:`gspdml.data.eval_transform`.

All randomness comes from the ``torch.Generator`` argument (:mod:`gspdml.data.seeded`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image


class Compose:
    """Apply ``transforms`` in order, all drawing from the same generator."""

    def __init__(self, transforms: Sequence[Callable[..., Any]]):
        self.transforms = list(transforms)

    def __call__(self, x: Any, generator: Optional[torch.Generator]) -> Any:
        for transform in self.transforms:
            x = transform(x, generator)
        return x

    @property
    def decode_shorter_side(self) -> Optional[int]:
        """The shorter side the first step resizes to, when it is a :class:`Resize` of the
        shorter side: a JPEG may be decoded at reduced size for it
        (:func:`gspdml.data.images.load_image`)."""
        first = self.transforms[0] if self.transforms else None
        return first.size if isinstance(first, Resize) and isinstance(first.size, int) else None

    def __repr__(self) -> str:
        return f"Compose({self.transforms!r})"


def _randint(low: int, high: int, generator: torch.Generator) -> int:
    """A uniform integer in ``[low, high]`` (inclusive)."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))


class RandomShift:
    """Translate a tensor image ``[C, H, W]`` by ``(dy, dx)`` drawn uniformly from
    ``[-max_shift, max_shift]²``, filling with the replicated border."""

    def __init__(self, max_shift: int):
        if max_shift < 0:
            raise ValueError(f"max_shift must be >= 0, got {max_shift}")
        self.max_shift = int(max_shift)

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        s = self.max_shift
        dy, dx = _randint(-s, s, generator), _randint(-s, s, generator)
        if s == 0:
            return x
        padded = F.pad(x[None], (s, s, s, s), mode="replicate")[0]
        h, w = x.shape[-2:]
        return padded[:, s - dy : s - dy + h, s - dx : s - dx + w].contiguous()

    def __repr__(self) -> str:
        return f"RandomShift({self.max_shift})"


class TilePermutation:
    """Cut a tensor image ``[C, H, W]`` into a ``grid × grid`` array of tiles and put them back
    in a uniformly random order (for collages: moves the target tile, keeps every tile intact)."""

    def __init__(self, grid: int):
        if grid < 1:
            raise ValueError(f"grid must be >= 1, got {grid}")
        self.grid = int(grid)

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        g = self.grid
        c, h, w = x.shape
        if h % g or w % g:
            raise ValueError(f"image of size {h}x{w} cannot be cut into a {g}x{g} grid")
        tiles = (
            x.reshape(c, g, h // g, g, w // g)
            .permute(1, 3, 0, 2, 4)
            .reshape(g * g, c, h // g, w // g)
        )
        tiles = tiles[torch.randperm(g * g, generator=generator)]
        return (
            tiles.reshape(g, g, c, h // g, w // g)
            .permute(2, 0, 3, 1, 4)
            .reshape(c, h, w)
            .contiguous()
        )

    def __repr__(self) -> str:
        return f"TilePermutation({self.grid})"


def _uniform(low: float, high: float, generator: torch.Generator) -> float:
    return low + (high - low) * float(torch.rand(1, generator=generator, dtype=torch.float64))


def _pair(size: Union[int, Sequence[int]]) -> tuple[int, int]:
    """``(h, w)`` of a size given as one int (a square) or as ``(h, w)``."""
    return (int(size), int(size)) if isinstance(size, int) else (int(size[0]), int(size[1]))


class Resize:
    """Resize so that the shorter side is ``size`` (the longer side keeps the aspect ratio,
    truncated to an integer, as ``torchvision.transforms.Resize(int)`` does), or to exactly
    ``(h, w)`` when ``size`` is a pair; bilinear by default."""

    def __init__(
        self, size: Union[int, Sequence[int]], interpolation: int = Image.Resampling.BILINEAR
    ):
        self.size = int(size) if isinstance(size, int) else _pair(size)
        self.interpolation = interpolation

    def __call__(
        self, image: Image.Image, generator: Optional[torch.Generator] = None
    ) -> Image.Image:
        size = self.output_size(*image.size)
        return image if size == image.size else image.resize(size, self.interpolation)

    def output_size(self, w: int, h: int) -> tuple[int, int]:
        """The ``(width, height)`` a ``w x h`` image is resized to."""
        if not isinstance(self.size, int):
            return (self.size[1], self.size[0])
        short, long = (w, h) if w <= h else (h, w)
        if short == self.size:
            return (w, h)
        new_long = int(self.size * long / short)
        return (self.size, new_long) if w <= h else (new_long, self.size)

    def __repr__(self) -> str:
        return f"Resize({self.size})"


class CenterCrop:
    """Crop the central ``h × w`` region (``size``: an int for a square, or ``(h, w)``; offsets
    ``round((H - h) / 2)`` and ``round((W - w) / 2)``, as torchvision's ``CenterCrop``). An image
    smaller than the crop is first padded with black, centred, as torchvision does, so every
    output has the crop's size."""

    def __init__(self, size: Union[int, Sequence[int]]):
        self.size = _pair(size)

    def __call__(
        self, image: Image.Image, generator: Optional[torch.Generator] = None
    ) -> Image.Image:
        w, h = image.size
        crop_h, crop_w = self.size
        if w < crop_w or h < crop_h:
            canvas = Image.new(image.mode, (max(w, crop_w), max(h, crop_h)))
            canvas.paste(image, ((max(w, crop_w) - w) // 2, (max(h, crop_h) - h) // 2))
            image, (w, h) = canvas, canvas.size
        top, left = int(round((h - crop_h) / 2.0)), int(round((w - crop_w) / 2.0))
        return image.crop((left, top, left + crop_w, top + crop_h))

    def __repr__(self) -> str:
        crop_h, crop_w = self.size
        return f"CenterCrop({crop_h})" if crop_h == crop_w else f"CenterCrop({self.size})"


class RandomResizedCrop:
    """Crop a random region of area fraction ``U(scale)`` and aspect ratio ``exp(U(log ratio))``
    and resize it to ``size × size`` (the sampling rule of torchvision's RandomResizedCrop:
    10 attempts, then a centre crop with the ratio clamped to ``ratio``)."""

    def __init__(
        self,
        size: int,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3 / 4, 4 / 3),
        interpolation: int = Image.Resampling.BILINEAR,
    ):
        if not (0 < scale[0] <= scale[1] and 0 < ratio[0] <= ratio[1]):
            raise ValueError(
                f"need 0 < scale[0] <= scale[1] and 0 < ratio[0] <= ratio[1], got {scale}, {ratio}"
            )
        self.size = int(size)
        self.scale: tuple[float, float] = (scale[0], scale[1])
        self.ratio: tuple[float, float] = (ratio[0], ratio[1])
        self.interpolation = interpolation

    def box(self, width: int, height: int, generator: torch.Generator) -> tuple[int, int, int, int]:
        """``(top, left, h, w)`` of the crop."""
        area = width * height
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * _uniform(*self.scale, generator)
            aspect = math.exp(_uniform(*log_ratio, generator))
            w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return _randint(0, height - h, generator), _randint(0, width - w, generator), h, w
        in_ratio = width / height
        if in_ratio < self.ratio[0]:
            w, h = width, int(round(width / self.ratio[0]))
        elif in_ratio > self.ratio[1]:
            w, h = int(round(height * self.ratio[1])), height
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, image: Image.Image, generator: torch.Generator) -> Image.Image:
        top, left, h, w = self.box(*image.size, generator)
        return image.resize(
            (self.size, self.size), self.interpolation, box=(left, top, left + w, top + h)
        )

    def __repr__(self) -> str:
        return f"RandomResizedCrop({self.size}, scale={self.scale}, ratio={self.ratio})"


class RandomHorizontalFlip:
    def __init__(self, p: float = 0.5):
        self.p = float(p)

    def __call__(self, image: Any, generator: torch.Generator) -> Any:
        flip = float(torch.rand(1, generator=generator)) < self.p
        if not flip:
            return image
        if isinstance(image, torch.Tensor):
            return image.flip(-1)
        return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip({self.p})"


class ToTensor:
    """An RGB PIL image to a float tensor ``[3, H, W]`` in [0, 1]."""

    def __call__(
        self, image: Image.Image, generator: Optional[torch.Generator] = None
    ) -> torch.Tensor:
        array = np.asarray(image, dtype=np.uint8)
        if array.ndim == 2:
            array = array[:, :, None]
        # channels first while still bytes: one contiguous copy, which the float conversion,
        # the normalisation and the batch's stacking then read in order
        channels_first = np.ascontiguousarray(array.transpose(2, 0, 1))
        return torch.from_numpy(channels_first).float().div_(255.0)

    def __repr__(self) -> str:
        return "ToTensor()"


class Normalize:
    """``(x · value_range - mean) / std`` per channel, after reversing the channels to BGR when
    ``bgr`` (the Caffe convention of BN-Inception: BGR, values in [0, 255], mean (104, 117, 128),
    std 1)."""

    def __init__(
        self,
        mean: Sequence[float],
        std: Sequence[float],
        bgr: bool = False,
        value_range: float = 1.0,
    ):
        self.mean = torch.tensor(mean, dtype=torch.float32)[:, None, None]
        self.std = torch.tensor(std, dtype=torch.float32)[:, None, None]
        self.bgr, self.value_range = bool(bgr), float(value_range)

    def __call__(
        self, x: torch.Tensor, generator: Optional[torch.Generator] = None
    ) -> torch.Tensor:
        if self.bgr:
            x = x.flip(0)
        # one new tensor, the rest in place: the same operations in the same order as
        # (x * value_range - mean) / std, so the same values (x * 1.0 is x)
        y = x.mul(self.value_range).sub_(self.mean) if self.value_range != 1.0 else x.sub(self.mean)
        return y.div_(self.std)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean.flatten().tolist()}, std={self.std.flatten().tolist()}, bgr={self.bgr}, value_range={self.value_range})"


class RandomErasing:
    """Random erasing (Zhong et al., "Random Erasing Data Augmentation", AAAI 2020, Algorithm 1)
    on a tensor image ``[C, H, W]``: with probability ``p``, draw an area
    ``S_e ~ U(area) · H W`` and an aspect ratio ``r ~ U(min_aspect, 1 / min_aspect)``, a
    rectangle ``round(sqrt(S_e r)) x round(sqrt(S_e / r))`` (height x width) at a uniform
    position, and set it to ``value`` (one number per channel); up to 100 draws until the
    rectangle fits inside the image, else the image is left as it is."""

    ATTEMPTS = 100

    def __init__(
        self,
        p: float = 0.5,
        area: tuple[float, float] = (0.02, 0.4),
        min_aspect: float = 0.3,
        value: Sequence[float] = (0.0, 0.0, 0.0),
    ):
        if not (0.0 <= p <= 1.0 and 0.0 < area[0] <= area[1] < 1.0 and 0.0 < min_aspect <= 1.0):
            raise ValueError(
                f"need 0 <= p <= 1, 0 < area[0] <= area[1] < 1 and 0 < min_aspect <= 1; "
                f"got p={p}, area={area}, min_aspect={min_aspect}"
            )
        self.p, self.area, self.min_aspect = float(p), (float(area[0]), float(area[1])), min_aspect
        self.value = torch.tensor(value, dtype=torch.float32)[:, None, None]

    def __call__(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if _uniform(0.0, 1.0, generator) >= self.p:
            return x
        height, width = x.shape[-2:]
        for _ in range(self.ATTEMPTS):
            target = _uniform(*self.area, generator) * height * width
            aspect = _uniform(self.min_aspect, 1.0 / self.min_aspect, generator)
            h, w = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
            if h < height and w < width:
                top, left = _randint(0, height - h, generator), _randint(0, width - w, generator)
                x = x.clone()
                x[:, top : top + h, left : left + w] = self.value.to(x.dtype)
                return x
        return x

    def __repr__(self) -> str:
        return (
            f"RandomErasing(p={self.p}, area={self.area}, min_aspect={self.min_aspect}, "
            f"value={self.value.flatten().tolist()})"
        )
