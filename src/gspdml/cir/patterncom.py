"""PatternCom: the remote-sensing composed-retrieval benchmark built on PatternNet (Psomas thesis
§5.4.1, Table 5.1).

Input: a PatternNet folder tree (``ROOT/images/<class>/<file>`` or ``ROOT/<class>/<file>``; every
image is in the database, 38 × 800 = 30,400 for the real dataset) and the PatternCom annotation
files ``<attribute>.csv`` (rows ``filename, …, value``: the first column names an image, the last
its attribute value; a header row is skipped).

Protocol, as coded in billpsomas/rscir (Psomas thesis §5.4.1; github.com/billpsomas/rscir evaluation):

* classes are merged first (:data:`CLASS_MERGES`; from the code only);
* every annotated image with value v is a query once for every *other* value v′ annotated in the
  same merged class, with the bare value v′ as text (no template, as in the code; the thesis is silent);
* positives: the images annotated with v′ in the same attribute and merged class;
* the query image stays in the database (it is never a positive);
* one group per attribute; AVG = mean over the attributes (reproduces the printed AVG of Table 5.2).

:data:`TABLE_5_1` holds the published statistics (#positives, #queries) and
:func:`table_mismatches` compares a built protocol with them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gspdml.data.images import IMAGE_EXTENSIONS
from gspdml.data.textfiles import read_csv_records
from gspdml.errors import DataError

from .composition_protocol import CompositionProtocol, CompositionQuery

CLASS_MERGES = {
    "denseresidential": "residential",
    "sparseresidential": "residential",
    "closedroad": "road",
    "intersection": "road",
    "bridge": "roadpass",
    "overpass": "roadpass",
    "ferryterminal": "pier",
    "harbor": "pier",
    "parkingspace": "parking",
    "parkinglot": "parking",
}

# attribute -> merged class -> value -> (#positives, #queries); Psomas thesis Table 5.1 (three
# #queries cells derived there from the query rule).
TABLE_5_1 = {
    "color": {
        "airplane": {"white": (672, 53), "purple": (53, 672)},
        "nursing home": {"white": (85, 383), "gray": (383, 85)},
        "crosswalk": {"white": (412, 388), "yellow": (388, 412)},
        "tennis court": {
            "blue": (339, 287),
            "brown": (2, 624),
            "gray": (50, 576),
            "green": (211, 415),
            "red": (24, 602),
        },
    },
    "context": {"roadpass": {"concrete": (800, 800), "water": (800, 800)}},
    "density": {"residential": {"sparse": (800, 800), "dense": (800, 800)}},
    "existence": {
        "parking": {"with cars": (947, 653), "without cars": (653, 947)},
        "pier": {"with boats": (1345, 255), "without boats": (255, 1345)},
    },
    "quantity": {
        "storage tank": {
            "one": (356, 261),
            "two": (119, 498),
            "three": (65, 552),
            "four": (77, 540),
        },
        "wastewater treatment plant": {
            "one": (724, 78),
            "two": (44, 758),
            "three": (10, 792),
            "four": (24, 778),
        },
        "basketball court": {
            "one": (340, 383),
            "two": (286, 437),
            "three": (21, 702),
            "half": (61, 662),
            "two-halfs": (15, 708),
        },
    },
    "shape": {
        "swimming pool": {
            "rectangular": (261, 299),
            "oval": (52, 508),
            "kidney-shaped": (247, 313),
        },
        "river": {"curved": (177, 623), "straight": (623, 177)},
        "road": {"cross": (800, 800), "round": (800, 800)},
    },
}


def class_key(name: str) -> str:
    """Folder or table class name → comparison key (lowercase letters and digits only)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def merged_class(folder: str) -> str:
    """The PatternCom class of a PatternNet folder: a merge target, or the folder name with
    underscores as spaces ("tennis_court" → "tennis court")."""
    return CLASS_MERGES.get(class_key(folder), folder.replace("_", " ").strip())


@dataclass
class PatternCom:
    protocol: CompositionProtocol
    classes: list[str]  # merged class of every database image
    annotations: dict[str, list[tuple[int, str]]]  # attribute -> [(database index, value)]

    def statistics(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """``(attribute, class, value) -> (#positives, #queries)`` as in Table 5.1."""
        positives = Counter(
            (a, self.classes[i], v) for a, rows in self.annotations.items() for i, v in rows
        )
        queries = Counter((q.group, self.classes[q.image], q.text) for q in self.protocol.queries)
        return {key: (count, queries.get(key, 0)) for key, count in positives.items()}


def _database(root: Path) -> tuple[list[str], list[str]]:
    images_dir = root / "images" if (root / "images").is_dir() else root
    folders = sorted(p for p in images_dir.iterdir() if p.is_dir() and p.name != "PatternCom")
    paths, classes = [], []
    for folder in folders:
        for file in sorted(folder.iterdir()):
            if file.suffix.lower() in IMAGE_EXTENSIONS:
                paths.append(str(file))
                classes.append(merged_class(folder.name))
    if not paths:
        raise DataError(f"PatternNet: no class folders with images under {images_dir}")
    return paths, classes


def _read_annotations(path: Path, index: dict[str, int]) -> list[tuple[int, str]]:
    rows = []
    for number, row in read_csv_records(path):
        if not "".join(row).strip():
            continue
        name = row[0].strip()
        if number == 1 and not name.lower().endswith(IMAGE_EXTENSIONS):
            continue  # header
        if len(row) < 2 or not row[-1].strip():
            raise DataError(f"{path}:{number}: expected 'filename, ..., value', got {row!r}")
        key = Path(name).name
        if key not in index:
            raise DataError(f"{path}:{number}: image {name!r} is not in the PatternNet folder tree")
        rows.append((index[key], row[-1].strip()))
    if not rows:
        raise DataError(f"{path}: no annotations")
    return rows


def read_patterncom(root: str | Path, annotations: str | Path | None = None) -> PatternCom:
    """Build the PatternCom protocol from a PatternNet tree and its annotation CSVs (default
    ``ROOT/PatternCom/*.csv``)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DataError(f"PatternNet root {root} is not a directory")
    folder = Path(annotations).expanduser() if annotations else root / "PatternCom"
    files = sorted(folder.glob("*.csv")) if folder.is_dir() else []
    if not files:
        raise DataError(f"PatternCom: no <attribute>.csv annotation files in {folder}")
    paths, classes = _database(root)
    names = [Path(p).name for p in paths]
    duplicates = [n for n, c in Counter(names).items() if c > 1]
    if duplicates:
        raise DataError(
            f"PatternNet: file names must be unique across class folders; repeated: {', '.join(duplicates[:5])}"
        )
    index = {name: i for i, name in enumerate(names)}
    protocol = CompositionProtocol(paths, paths)
    annotated = {}
    for file in files:
        attribute = file.stem
        rows = _read_annotations(file, index)
        annotated[attribute] = rows
        members: dict[str, dict[str, list[int]]] = {}  # class -> value -> images (first-seen order)
        for image, value in rows:
            members.setdefault(classes[image], {}).setdefault(value, []).append(image)
        for image, value in rows:
            for other, positives in members[classes[image]].items():
                if other != value:
                    protocol.queries.append(
                        CompositionQuery(image, other, np.asarray(positives), attribute)
                    )
    return PatternCom(protocol, classes, annotated)


def table_mismatches(patterncom: PatternCom) -> list[str]:
    """Differences between a built protocol and Table 5.1 (empty for the real benchmark)."""
    published = {
        (a, c, v): counts
        for a, by_class in TABLE_5_1.items()
        for c, values in by_class.items()
        for v, counts in values.items()
    }
    found = patterncom.statistics()
    problems = []
    for key in sorted(set(published) | set(found)):
        if published.get(key) != found.get(key):
            problems.append(
                f"{'/'.join(key)}: (#positives, #queries) = {found.get(key)}, Table 5.1 has {published.get(key)}"
            )
    return problems
