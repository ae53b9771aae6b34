"""The mechanism check of the collage studies: how much pooling weight falls on the target tile.

A collage of ``grid × grid`` tiles has one target tile (its position is recorded by the collage
builders as the dataset's ``tile_positions``); the pooling weights ``w [h, w]`` of a trained
embedder (GSP: the transported mass per location, normalised to sum 1) are summed over the
locations of the target tile. Global average pooling gives ``1/grid²`` by construction; a
pooling that selects the target tile approaches 1 (GSP paper, Fig. 3b.2: weight maps on unseen
test classes).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch import nn

from gspdml.data.base import LabelledDataset


@torch.no_grad()
def target_tile_share(
    model: nn.Module, dataset: LabelledDataset, grid: int, batch_size: int = 256
) -> Optional[float]:
    """Mean over ``dataset`` of the share of pooling weight inside the target tile; ``None`` when
    the pooling has no spatial weights (GMP, GeM) or the dataset records no target positions."""
    positions = getattr(dataset, "tile_positions", None)
    if positions is None:
        return None
    was_training = model.training
    model.eval()
    shares = []
    try:
        for start in range(0, len(dataset), batch_size):
            images = torch.stack(
                [dataset[i][0] for i in range(start, min(start + batch_size, len(dataset)))]
            )
            weights = model(images).weights
            if weights is None:
                return None
            maps = weights.float().reshape(len(images), *weights.shape[-2:])
            shares.append(tile_mass(maps, positions[start : start + len(images)], grid))
    finally:
        model.train(was_training)
    return float(np.concatenate(shares).mean())


def tile_mass(weights: torch.Tensor, positions: np.ndarray, grid: int) -> np.ndarray:
    """Share of each map's total weight ``[B, h, w]`` inside tile ``positions[b]`` (row-major in a
    ``grid × grid`` layout; ``h`` and ``w`` must be multiples of ``grid``)."""
    b, h, w = weights.shape
    if h % grid or w % grid:
        raise ValueError(f"a {h}x{w} weight map does not split into {grid}x{grid} tiles")
    tiles = (
        weights.reshape(b, grid, h // grid, grid, w // grid).sum(dim=(2, 4)).reshape(b, grid * grid)
    )
    total = tiles.sum(1).clamp_min(1e-12)
    picked = tiles[torch.arange(b), torch.as_tensor(np.asarray(positions), dtype=torch.long)]
    return (picked / total).numpy()
