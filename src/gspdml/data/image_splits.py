"""Turn the official class-disjoint splits of a file-based dataset into :class:`DataSplits`.

A reader (CUB, Cars196, SOP, In-Shop, image folder, CSV) returns :class:`OfficialSplits`: the
training records and either test records (leave-one-out retrieval) or query and gallery records
(In-Shop). :func:`build_image_splits` carves validation classes off the training classes
(:func:`gspdml.data.splits.validation_classes`), relabels every split contiguously and wraps each
in an :class:`ImageFileDataset` with the training or evaluation transform.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from gspdml.data.base import DATASETS, DataSplits, EvalSplit, LabelledDataset
from gspdml.data.files import ImageFileDataset
from gspdml.data.recipes import ImageRecipe, image_transform
from gspdml.data.splits import contiguous_labels, train_test_classes, validation_classes
from gspdml.errors import ConfigError, DataError
from gspdml.registry import documented_by, supplied_by_caller


@dataclass
class Records:
    """Image files and their original class ids."""

    paths: list[str]
    labels: np.ndarray
    names: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels = np.asarray(self.labels, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def classes(self) -> np.ndarray:
        return np.unique(self.labels)

    def subset(self, classes: npt.ArrayLike) -> Records:
        keep = np.isin(self.labels, np.asarray(classes))
        return Records([p for p, k in zip(self.paths, keep) if k], self.labels[keep], self.names)


@dataclass
class OfficialSplits:
    train: Records
    test: Optional[Records] = None
    query: Optional[Records] = None
    gallery: Optional[Records] = None
    val: Optional[Records] = None  # a validation split given by the data itself (folder, CSV)
    skipped: list[str] = field(default_factory=list)  # hidden or system entries the reader left out

    @property
    def parts(self) -> list[Records]:
        """The splits present."""
        return [
            r for r in (self.train, self.val, self.test, self.query, self.gallery) if r is not None
        ]

    def check_disjoint(self, source: str) -> None:
        """Raise :class:`DataError` when two splits share a class (a classification split)."""
        evaluation = [r for r in (self.test, self.query, self.gallery) if r is not None]
        parts: dict[str, npt.ArrayLike] = {
            "train": self.train.classes,
            "val": self.val.classes if self.val is not None else [],
            "evaluation": np.unique(np.concatenate([r.labels for r in evaluation])),
        }
        for a, b in (("train", "val"), ("train", "evaluation"), ("val", "evaluation")):
            shared = np.intersect1d(parts[a], parts[b])
            if len(shared):
                raise DataError(
                    f"{source}: {len(shared)} classes are in both the {a} and the {b} split "
                    f"(e.g. {shared[:5].tolist()}); that is a classification split, not a zero-shot one"
                )

    def checked(self, source: str, expected: dict[str, int]) -> OfficialSplits:
        """These splits, refused when two share a class or, when the whole official dataset is
        present (the published total of ``expected["images"]``), when a count differs from the
        published zero-shot split (guards against reading the classification split)."""
        self.check_disjoint(source)
        named = {
            "train": self.train,
            "test": self.test,
            "query": self.query,
            "gallery": self.gallery,
        }
        parts = {name: r for name, r in named.items() if r is not None}
        found = {f"{name}_images": len(r) for name, r in parts.items()}
        found.update({f"{name}_classes": len(r.classes) for name, r in parts.items()})
        found["images"] = sum(len(r) for r in parts.values())
        if self.query is not None and self.gallery is not None:
            found["test_classes"] = len(np.union1d(self.query.classes, self.gallery.classes))
        if found["images"] != expected["images"]:
            return self
        wrong = {k: (found.get(k), v) for k, v in expected.items() if found.get(k) != v}
        if wrong:
            listing = ", ".join(f"{k} {got} (expected {want})" for k, (got, want) in wrong.items())
            raise DataError(
                f"{source}: the split does not match the published zero-shot split: {listing}"
            )
        return self


#: a reader of a dataset's files: ``reader(root, ...) -> OfficialSplits``
Reader = Callable[..., OfficialSplits]


def split_first_half(records: Records) -> OfficialSplits:
    """The first half of the sorted class ids for training, the rest for test
    (:func:`~gspdml.data.splits.train_test_classes`)."""
    train, test = train_test_classes(records.classes)
    return OfficialSplits(train=records.subset(train), test=records.subset(test))


def build_image_splits(
    official: OfficialSplits,
    *,
    seed: int,
    val_fraction: float,
    val_fold: Optional[int],
    num_folds: int,
    val_classes: Optional[Sequence[int]],
    transform: str,
    normalization: str,
    resize: Optional[int],
    crop: Optional[int],
    on_error: str,
    check: str,
    min_val_classes: int = 1,
) -> DataSplits:
    """Datasets for training (fit classes, relabelled ``0..C-1``), validation and test.

    Args:
        transform: the augmentation recipe: ``mlrc``, ``proxynca``, ``libc`` or ``center``
            (:func:`~gspdml.data.recipes.image_transform`).
        normalization: the backbone's input normalisation: ``imagenet``, ``bn_inception`` or
            ``none``.
        resize: the resize side in pixels, overriding the recipe's (null: the recipe's).
        crop: the crop side in pixels, overriding the recipe's (null: the recipe's).
    """
    if official.val is not None:
        if val_fold is not None or val_classes is not None:
            raise ConfigError(
                "data.dataset.val_classes",
                "the data has its own validation split, but val_fold / val_classes "
                "(and the protocol folds) carve validation classes off the training "
                "classes: drop them, or move the 'val' images into 'train'",
            )
        fit, val = official.train.classes, official.val.classes
    else:
        fit, val = validation_classes(
            official.train.classes,
            val_fraction,
            val_fold,
            num_folds,
            val_classes,
            minimum=min_val_classes,
        )
    train_tf = image_transform(transform, True, normalization, resize, crop)
    eval_tf = image_transform(transform, False, normalization, resize, crop)

    def dataset(
        records: Records, classes: np.ndarray, tf: Callable[..., Any], train: bool = False
    ) -> ImageFileDataset:
        part = records.subset(classes)
        names = [records.names.get(int(c), str(c)) for c in classes]
        return ImageFileDataset(
            part.paths,
            contiguous_labels(part.labels, classes),
            tf,
            seed=seed if train else 0,
            on_error=on_error,
            check=check,
            class_names=names,
            classes=classes,
        )

    train = dataset(official.train, fit, train_tf, train=True)
    val_source = official.val if official.val is not None else official.train
    val_split = EvalSplit(dataset(val_source, val, eval_tf)) if len(val) else None
    if official.test is not None:
        test = EvalSplit(dataset(official.test, official.test.classes, eval_tf))
    elif official.query is not None and official.gallery is not None:
        classes = np.union1d(official.query.classes, official.gallery.classes)
        test = EvalSplit(
            dataset(official.query, classes, eval_tf), dataset(official.gallery, classes, eval_tf)
        )
    else:
        raise DataError("the reader returned neither test records nor query and gallery records")
    notes = []
    if official.skipped:
        notes.append(
            f"skipped {len(official.skipped)} hidden or system entries: {_listing(official.skipped)}"
        )
    parts: dict[str, list[Optional[LabelledDataset]]] = {
        "train": [train],
        "val": [val_split.query] if val_split else [],
        "test": [test.query, test.gallery],
    }
    for name, datasets in parts.items():
        for part in datasets:
            if isinstance(part, ImageFileDataset) and part.skipped:
                notes.append(
                    f"{name}: skipped {len(part.skipped)} unusable image files (on_error: skip): "
                    + _listing([f"{p} ({why})" for p, why in part.skipped])
                )
    return DataSplits(train=train, val=val_split, test=test, notes=notes)


def _listing(items: Sequence[str], shown: int = 10) -> str:
    more = f", ... ({len(items) - shown} more)" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


IMAGE_OPTIONS = dict(
    val_fraction=0.25,
    val_fold=None,
    num_folds=4,
    val_classes=None,
    **dataclasses.asdict(ImageRecipe()),
    on_error="raise",
    check="exists",
)
#: the type of each option, checked at config time (gspdml.typecheck)
IMAGE_OPTION_TYPES = dict(
    val_fraction=float,
    val_fold=Optional[int],
    num_folds=int,
    val_classes=Optional[list[int]],
    **typing.get_type_hints(ImageRecipe),
    on_error=str,
    check=str,
)


def register_image_dataset(
    name: str, *aliases: str, min_val_classes: int = 1
) -> Callable[[Reader], Reader]:
    """Register ``reader(root, ...) -> OfficialSplits`` as a dataset factory taking the reader's
    own arguments, ``seed`` (supplied by the caller) and :data:`IMAGE_OPTIONS` (documented by
    :func:`build_image_splits`, :func:`~gspdml.data.splits.validation_classes` and
    :class:`~gspdml.data.files.ImageFileDataset`); ``min_val_classes``: the ``minimum`` of
    :func:`~gspdml.data.splits.validation_classes`."""

    def decorate(reader: Reader) -> Reader:
        own = list(inspect.signature(reader).parameters.values())
        required = [p.name for p in own if p.default is inspect.Parameter.empty]

        def factory(seed: int = 0, **kwargs: Any) -> DataSplits:
            for arg in required:
                if arg not in kwargs:
                    raise ConfigError(f"data.dataset.{arg}", f"required by dataset '{name}'")
            reader_args = {p.name: kwargs.pop(p.name) for p in own if p.name in kwargs}
            return build_image_splits(
                reader(**reader_args),
                seed=seed,
                min_val_classes=min_val_classes,
                **{**IMAGE_OPTIONS, **kwargs},
            )

        keyword = inspect.Parameter.KEYWORD_ONLY
        hints = typing.get_type_hints(reader)
        # inspect.signature reads __signature__, which a function takes like any attribute
        factory.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(kind=keyword, annotation=hints.get(p.name, p.annotation)) for p in own]
            + [inspect.Parameter("seed", keyword, default=0, annotation=int)]
            + [
                inspect.Parameter(k, keyword, default=v, annotation=IMAGE_OPTION_TYPES[k])
                for k, v in IMAGE_OPTIONS.items()
            ]
        )
        factory.__name__ = factory.__qualname__ = name
        factory.__doc__ = reader.__doc__
        documented = documented_by(build_image_splits, validation_classes, ImageFileDataset)
        DATASETS.register(name, *aliases)(supplied_by_caller("seed")(documented(factory)))
        return reader

    return decorate
