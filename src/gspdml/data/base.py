"""Dataset conventions shared by every reader.

* A dataset is a ``torch.utils.data.Dataset`` whose items are ``(image, label)`` with
  ``image`` a float tensor ``[C, H, W]`` and ``label`` an int.
* It exposes ``labels``: an int64 numpy array of every item's label (samplers and evaluation
  read labels without decoding images). Training splits use contiguous labels ``0..C-1``.
  :class:`LabelledDataset` declares this for the type checker.
* It may expose ``paths`` (one per item) for reports and search, and ``channels`` (image
  channels, for the backbone's first layer).
* The splits a factory returns expose ``classes``: the dataset's own id of each class (label
  ``i`` is class ``classes[i]``), so that the evaluation protocols can name the classes of a
  fold (:mod:`gspdml.data.splits`).
* A dataset factory is registered in :data:`DATASETS` and returns :class:`DataSplits`.
  Factories receive ``seed`` from the config's top-level ``seed`` (supplied by the caller).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, TypeVar

import numpy as np
from torch.utils.data import Dataset

from gspdml.registry import Registry

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

DATASETS = Registry("dataset", complete=False)
_Options = TypeVar("_Options", bound="DataclassInstance")


def spec_options(options: type[_Options], spec: Mapping[str, Any]) -> _Options:
    """The typed view of a few options of a ``data.dataset`` spec (every option of which the
    dataset registry has checked against the reader's signature): the frozen dataclass
    ``options`` with the fields the spec gives, the others at their defaults."""
    names = [f.name for f in dataclasses.fields(options)]
    return options(**{name: spec[name] for name in names if name in spec})


class LabelledDataset(Dataset[Any]):
    """A dataset of ``(image, label)`` items with the ``labels`` of all of them (module
    docstring); readers derive from it."""

    labels: np.ndarray

    def __len__(self) -> int:
        raise NotImplementedError


@dataclass
class EvalSplit:
    """An evaluation split: leave-one-out on ``query`` when ``gallery`` is None (CUB, Cars, SOP),
    query -> gallery retrieval otherwise (In-Shop)."""

    query: LabelledDataset
    gallery: Optional[LabelledDataset] = None


@dataclass
class DataSplits:
    """The splits of one dataset. Train, validation and test classes are disjoint (zero-shot)."""

    train: LabelledDataset
    val: Optional[EvalSplit] = None
    test: Optional[EvalSplit] = None
    #: what the reader left out or changed (hidden folders, unusable files), shown at the start of a run
    notes: list[str] = field(default_factory=list)

    @property
    def channels(self) -> int:
        return int(getattr(self.train, "channels", 3))

    @property
    def num_classes(self) -> int:
        return int(self.train.labels.max()) + 1


def build_data(spec: Any, seed: int, field: str = "data") -> DataSplits:
    splits: DataSplits = DATASETS.build(spec, field, seed=seed)
    return splits
