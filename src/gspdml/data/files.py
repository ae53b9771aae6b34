"""A dataset of image files on disk with a label each (the base of every file-based reader)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt
from PIL import Image

from gspdml.data.base import LabelledDataset
from gspdml.data.images import check_image, load_image
from gspdml.data.seeded import seeded_generator
from gspdml.data.transforms import ToTensor
from gspdml.errors import ConfigError, DataError

ON_ERROR = ("raise", "skip")
CHECKS = ("none", "exists", "header")
FIELD = "data.dataset"


def _check_choice(value: str, allowed: Sequence[str], option: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{FIELD}.{option}", f"got {value!r}; allowed: {', '.join(allowed)}")
    return value


class ImageFileDataset(LabelledDataset):
    """Items ``(transform(load_image(path), generator), label)``.

    Args:
        paths, labels: one file and one integer label per item.
        transform: a seeded transform ``(PIL image, generator) -> tensor`` (see
            :mod:`gspdml.data.recipes`); the generator is seeded from ``(seed, epoch, index)``,
            so augmentations do not depend on DataLoader workers. Default: :class:`ToTensor`.
        on_error: ``"raise"``: a missing or undecodable file is a :class:`DataError` naming it.
            ``"skip"``: files failing the construction-time ``check`` are dropped (listed in
            :attr:`skipped`, and a warning gives the count and the first names); a file that
            fails to decode later is replaced by the next item of its class, with a warning.
        check: what is checked for every file when the dataset is built: ``"exists"`` (cheap),
            ``"header"`` (opens each file and parses its header), or ``"none"``.
        class_names: optional name per label (for reports).
        classes: optional original class id per label (label ``i`` is class ``classes[i]`` of
            the dataset's own numbering; default: the labels themselves).
    """

    channels = 3

    @property
    def _shorter_side(self) -> Optional[int]:
        """What a reduced-size JPEG decode may aim at (the transform's first resize)."""
        return getattr(self.transform, "decode_shorter_side", None)

    def __init__(
        self,
        paths: Sequence[str],
        labels: npt.ArrayLike,
        transform: Optional[Callable[..., Any]] = None,
        *,
        seed: int = 0,
        on_error: str = "raise",
        check: str = "exists",
        class_names: Optional[Sequence[str]] = None,
        classes: Optional[npt.ArrayLike] = None,
    ):
        self.on_error = _check_choice(on_error, ON_ERROR, "on_error")
        _check_choice(check, CHECKS, "check")
        paths = [os.fspath(p) for p in paths]
        label_array = np.asarray(labels, dtype=np.int64)
        if len(paths) != len(label_array):
            raise ValueError(f"{len(paths)} paths but {len(label_array)} labels")
        self.skipped: list[tuple[str, str]] = []
        if check != "none":
            problems = [(p, self._problem(p, check)) for p in paths]
            bad = {p: why for p, why in problems if why}
            if bad:
                listing = "; ".join(f"{p}: {why}" for p, why in list(bad.items())[:5])
                if self.on_error == "raise":
                    raise DataError(
                        f"{len(bad)} of {len(paths)} image files are unusable (on_error: skip drops them): {listing}"
                    )
                keep = np.array([p not in bad for p in paths])
                self.skipped = list(bad.items())
                warnings.warn(f"skipped {len(bad)} unusable image files: {listing}", stacklevel=2)
                paths, label_array = [p for p, k in zip(paths, keep) if k], label_array[keep]
        self.paths = paths
        self.labels = label_array
        self.transform = transform or ToTensor()
        self.seed = int(seed)
        self.epoch = 0
        self.class_names = list(class_names) if class_names is not None else None
        self.classes = (
            np.asarray(classes, dtype=np.int64) if classes is not None else np.unique(label_array)
        )
        self._warned: set[str] = set()

    @staticmethod
    def _problem(path: str, check: str) -> Optional[str]:
        if check == "exists":
            if os.path.isfile(path):
                return None
            return "not a regular file" if os.path.exists(path) else "file not found"
        return check_image(path)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, key: Union[int, tuple[int, int]]) -> tuple[Any, int]:
        index, epoch = key if isinstance(key, tuple) else (key, self.epoch)
        index = int(index)
        generator = seeded_generator(self.seed, epoch, index)
        return self.transform(self._load(index), generator), int(self.labels[index])

    def _load(self, index: int) -> Image.Image:
        try:
            return load_image(self.paths[index], self._shorter_side)
        except DataError as error:
            if self.on_error == "raise":
                raise
            first_error = error
        same = np.flatnonzero(self.labels == self.labels[index])
        start = int(np.searchsorted(same, index))
        for other in np.roll(same, -start)[1:]:
            try:
                image = load_image(self.paths[other], self._shorter_side)
            except DataError:
                continue
            if self.paths[index] not in self._warned:
                self._warned.add(self.paths[index])
                warnings.warn(
                    f"{first_error}; using {self.paths[other]} of the same class instead",
                    stacklevel=2,
                )
            return image
        raise DataError(
            f"{first_error}; no other image of class {self.labels[index]} can be decoded either"
        )
