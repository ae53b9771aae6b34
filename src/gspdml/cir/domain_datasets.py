"""The four domain-conversion benchmarks of FreeDom (Psomas thesis §4.4.1) in the layout of the
authors' release (github.com/NikosEfth/freedom): a data folder holding ``<name>/`` per dataset,
each with image lists of one ``PATH DOMAIN CLASS`` line per image (space-separated, ``PATH``
relative to the data folder, e.g. ``minidn/clipart/ant/clipart_007_000041.jpg clipart ant``).

* ``imagenet_r`` — ImageNet-R: renditions of 200 ImageNet classes in the domains cartoon,
  origami, sculpture and toy, plus the ImageNet validation images of those classes as the domain
  ``real`` (text "photo"; the PHOTO source of Tables 4.1-4.2). One list ``full_files.csv``
  (written by the release's ``set_dataset.py``): every image is a query and in the database.
* ``minidn`` — MiniDomainNet: 126 classes, domains clipart, painting, real ("photo"), sketch;
  the official test set is the query list ``query_files.csv``, the rest the database
  ``database_files.csv``.
* ``nico`` — NICO++: 60 classes of real photographs in the contexts autumn, dim ("dimlight"),
  grass, outdoor, rock, water; 10% of the images, drawn at random by the authors, are the
  queries (``query_files.csv``), the rest the database (``database_files.csv``).
* ``ltll`` — LTLL: 25 locations, modern (``New``, text "Today") and historical (``Old``,
  "Archive") images; one list ``full_files.csv``, every image a query and in the database.

Every query image is paired with every other domain as text; its positives are the database
images of its class in that domain (:func:`~gspdml.cir.composition_protocol.domain_conversion_protocol`).
The domain texts and the Recall@k cut-offs are those of the release's evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from gspdml.data.textfiles import read_text
from gspdml.errors import ConfigError, DataError

from .composition_protocol import CompositionProtocol, domain_conversion_protocol
from .freedom import check_choice


@dataclass(frozen=True)
class DomainDataset:
    """One benchmark: its folder under the data folder, its image lists (``queries is None``:
    the database images are the queries), the query text of each domain label, in the order
    of the tables' columns, and the Recall@k cut-offs the authors report."""

    name: str
    title: str
    database: str
    queries: Optional[str]
    domain_texts: Mapping[str, str]
    recall_at: tuple[int, ...]


DOMAIN_DATASETS = {
    dataset.name: dataset
    for dataset in (
        DomainDataset(
            "imagenet_r",
            "ImageNet-R",
            "full_files.csv",
            None,
            {
                "cartoon": "cartoon",
                "origami": "origami",
                "real": "photo",
                "sculpture": "sculpture",
                "toy": "toy",
            },
            (10, 50),
        ),
        DomainDataset(
            "minidn",
            "MiniDomainNet",
            "database_files.csv",
            "query_files.csv",
            {"clipart": "clipart", "painting": "painting", "real": "photo", "sketch": "sketch"},
            (50, 100),
        ),
        DomainDataset(
            "nico",
            "NICO++",
            "database_files.csv",
            "query_files.csv",
            {
                "autumn": "autumn",
                "dim": "dimlight",
                "grass": "grass",
                "outdoor": "outdoor",
                "rock": "rock",
                "water": "water",
            },
            (50, 100),
        ),
        DomainDataset(
            "ltll", "LTLL", "full_files.csv", None, {"New": "Today", "Old": "Archive"}, (5, 10)
        ),
    )
}


@dataclass(frozen=True)
class ImageList:
    """The images of one list file: absolute paths, domain labels and class names."""

    paths: list[str]
    domains: list[str]
    classes: list[str]


def get_domain_dataset(name: str) -> DomainDataset:
    check_choice("dataset", "domain-conversion dataset", name, DOMAIN_DATASETS)
    return DOMAIN_DATASETS[name]


def read_image_list(
    path: str | Path,
    data_root: str | Path,
    domains: Optional[Sequence[str]] = None,
    check_images: bool = False,
) -> ImageList:
    """Read a ``PATH DOMAIN CLASS`` list; ``PATH`` is resolved against ``data_root``. With
    ``domains`` given, any other domain label is an error (a list of another dataset);
    ``check_images`` verifies that every listed image exists."""
    path, data_root = Path(path).expanduser(), Path(data_root).expanduser().resolve()
    if not path.is_file():
        raise DataError(f"image list not found: {path}")
    paths, labels, classes = [], [], []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 3:
            raise DataError(
                f"{path}:{number}: expected 'PATH DOMAIN CLASS' (space-separated, no spaces in "
                f"names), got {line.strip()!r}"
            )
        if domains is not None and fields[1] not in domains:
            raise DataError(
                f"{path}:{number}: unknown domain {fields[1]!r}; this dataset has "
                f"{', '.join(domains)}"
            )
        paths.append(str(data_root / fields[0]))
        labels.append(fields[1])
        classes.append(fields[2])
    if not paths:
        raise DataError(f"{path}: the image list is empty")
    missing = [p for p in paths if not Path(p).is_file()] if check_images else []
    if missing:
        raise DataError(
            f"{path}: {len(missing)} of {len(paths)} listed images do not exist, e.g. "
            f"{missing[0]} (paths are relative to the data folder that holds {path.parent.name}/)"
        )
    return ImageList(paths, labels, classes)


def domain_dataset_protocol(
    name: str,
    data_root: str | Path,
    sources: Optional[Sequence[str]] = None,
    check_images: bool = True,
) -> CompositionProtocol:
    """The domain-conversion protocol of dataset ``name`` under ``data_root`` (the release's
    ``data/`` folder). ``sources`` keeps the queries of those source domain labels only (e.g.
    ``["real"]`` for the PHOTO-source Recall@k of Table 4.2); ``check_images`` verifies that
    every listed image exists."""
    dataset = get_domain_dataset(name)
    folder = Path(data_root).expanduser().resolve() / dataset.name
    if not folder.is_dir():
        raise DataError(
            f"{folder} does not exist: the data folder must hold {dataset.name}/ with its image "
            f"lists, as set up by the FreeDom release (github.com/NikosEfth/freedom)"
        )
    labels = list(dataset.domain_texts)
    database = read_image_list(folder / dataset.database, folder.parent, labels, check_images)
    queries = database
    if dataset.queries is not None:
        queries = read_image_list(folder / dataset.queries, folder.parent, labels, check_images)
    unknown = sorted(set(sources or ()) - set(labels))
    if unknown:
        raise ConfigError(
            "sources",
            f"{dataset.title} has no domain {unknown[0]!r}; choose from {', '.join(labels)}",
        )
    protocol = domain_conversion_protocol(
        database.paths,
        database.classes,
        database.domains,
        queries.paths,
        queries.classes,
        queries.domains,
        domain_texts=dict(dataset.domain_texts),
    )
    if sources:
        protocol.queries = [
            q for q in protocol.queries if q.group.split("->", 1)[0] in set(sources)
        ]
    return protocol
