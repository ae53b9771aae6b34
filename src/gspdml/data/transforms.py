"""Seeded transforms: every random transform is ``transform(x, generator) -> x``.

All randomness comes from the ``torch.Generator`` argument, which
:class:`gspdml.data.seeded.SeededTransformDataset` seeds from ``(seed, epoch, index)``, so an
item's augmentation is the same whatever the number of DataLoader workers and after a resume.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F


class Compose:
    """Apply ``transforms`` in order, all drawing from the same generator."""

    def __init__(self, transforms: Sequence):
        self.transforms = list(transforms)

    def __call__(self, x, generator: torch.Generator):
        for transform in self.transforms:
            x = transform(x, generator)
        return x

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
        return padded[:, s - dy:s - dy + h, s - dx:s - dx + w].contiguous()

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
        tiles = x.reshape(c, g, h // g, g, w // g).permute(1, 3, 0, 2, 4).reshape(g * g, c, h // g, w // g)
        tiles = tiles[torch.randperm(g * g, generator=generator)]
        return tiles.reshape(g, g, c, h // g, w // g).permute(2, 0, 3, 1, 4).reshape(c, h, w).contiguous()

    def __repr__(self) -> str:
        return f"TilePermutation({self.grid})"
