"""The Cifar Collage of the GSP paper (supplement §2.2 and Fig. 9; Gürbüz thesis §5.3.2), built
from CIFAR-100 (:mod:`gspdml.data.cifar`) by the collage builder of
:mod:`gspdml.data.shared_collage`.

As the paper describes it: CIFAR-100's 20 super-classes have 5 sub-classes each; every
super-class's sub-classes are split 2 / 1 / 2 between train, validation and test; 4 super-classes
are *shared* (background) and the other 16 define the classes (32 / 16 / 32 target classes, 8 / 4 /
8 background classes); a collage is one image of a target class and 3 images of background
classes of the same split, stitched 2×2 (four 32×32 tiles, a 64×64 image) with the target at a
uniformly random position. Classes are disjoint across splits, in the foreground and the
background alike.

Choices the paper leaves open (which super-classes are shared, which sub-classes go to which
split, which images, the grid) are listed in docs/paper-vs-code.md; ``grid: 1`` is the
"distilled" baseline, the target image alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from gspdml.data.base import DATASETS, DataSplits
from gspdml.data.cifar import cifar100_names, cifar_content, find_folder, load_cifar
from gspdml.data.collage import collage_splits
from gspdml.data.shared_collage import TileSource, compose_collages
from gspdml.errors import ConfigError, DataError
from gspdml.registry import documented_by, supplied_by_caller

#: the shared super-classes of the authors' released Cifar Collage builder
SHARED_SUPERCLASSES = (
    "large_man-made_outdoor_things",
    "large_natural_outdoor_scenes",
    "trees",
    "flowers",
)
FORMAT_VERSION = 1


def cifar_tiles(images: np.ndarray, fine: np.ndarray, coarse: np.ndarray) -> TileSource:
    """CIFAR images as collage tiles: class ``(coarse, fine)``; a tile is one image of its fine
    class, drawn uniformly (the splits are by class, so every split draws from all images)."""
    subclasses: dict[int, list[int]] = {}
    for c, f in sorted(set(zip(coarse.tolist(), fine.tolist()))):
        subclasses.setdefault(c, []).append(f)
    inconsistent = [f for f in np.unique(fine) if len(np.unique(coarse[fine == f])) != 1]
    if inconsistent:
        raise DataError(f"CIFAR-100: fine classes {inconsistent} have several coarse labels")
    pools = {int(f): np.flatnonzero(fine == f) for f in np.unique(fine)}

    def draw(s: int, a: int, b: int, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
        index = int(rng.choice(pools[b]))
        return images[index], [index]

    return TileSource(subclasses, tuple(images.shape[1:]), 1, draw)


def shared_ids(names: Sequence[str], coarse_names: Sequence[str]) -> list[int]:
    """The ids of the super-classes ``names`` (one name or a list); ConfigError naming the
    unknown ones and listing the 20."""
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in coarse_names]
    if unknown:
        raise ConfigError(
            "data.dataset.shared",
            f"{unknown} are not CIFAR-100 super-classes; they are: {', '.join(coarse_names)}",
        )
    return [list(coarse_names).index(n) for n in names]


@DATASETS.register("collage_cifar")
@supplied_by_caller("seed")
@documented_by(collage_splits)
def collage_cifar(
    seed: int = 0,
    root: Optional[str] = None,
    split_seed: int = 0,
    grid: int = 2,
    images_per_class: int = 600,
    shared: Sequence[str] = SHARED_SUPERCLASSES,
    sub_split: Sequence[int] = (2, 1, 2),
    augment: bool = False,
    max_shift: int = 2,
    shuffle_tiles: bool = True,
    cache: bool = True,
) -> DataSplits:
    """The Cifar Collage (module docstring) from the CIFAR-100 files under ``root``.

    Args:
        root: the folder of the CIFAR-100 python files.
        split_seed: seeds the construction (the run's seed varies training only).
        images_per_class: collages per target class.
        shared: the CIFAR-100 super-classes shared as the background (the authors' four).
        sub_split: sub-classes of each other super-class for train / validation / test.
        cache: cache the generated arrays by content hash.
    """
    params: dict[str, Any] = dict(
        split_seed=int(split_seed),
        grid=int(grid),
        images_per_class=int(images_per_class),
        sub_split=[int(v) for v in sub_split],
    )
    folder = find_folder("cifar100", root)
    fine_names, coarse_names = cifar100_names(folder)
    shared_set = shared_ids(shared, coarse_names)
    files = cifar_content("cifar100", str(folder))  # the key: the files' content, not the folder
    key = {"version": FORMAT_VERSION, "files": files, "shared": shared_set, **params}

    def build() -> dict[str, np.ndarray]:
        data = load_cifar("cifar100", str(folder))
        assert data.train_coarse is not None and data.test_coarse is not None  # CIFAR-100
        source = cifar_tiles(
            np.concatenate([data.train, data.test]),
            np.concatenate([data.train_labels, data.test_labels]),
            np.concatenate([data.train_coarse, data.test_coarse]),
        )
        return compose_collages(source, shared=shared_set, **params)

    return collage_splits(
        build,
        key,
        lambda coarse, fine: f"{coarse_names[coarse]}/{fine_names[fine]}",
        cache=cache,
        seed=seed,
        grid=grid,
        augment=augment,
        max_shift=max_shift,
        shuffle_tiles=shuffle_tiles,
        dataset="collage_cifar",
    )
