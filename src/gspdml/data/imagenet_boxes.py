"""The ImageNet-1k (ILSVRC 2012 CLS-LOC) validation images with their bounding boxes, in the
layout of the official localisation release (the Kaggle "ImageNet Object Localization
Challenge" files, ``imagenet_object_localization_patched2019.tar.gz``)::

    <root>/LOC_val_solution.csv                    "ImageId,PredictionString"
    <root>/ILSVRC/Annotations/CLS-LOC/val/<ImageId>.xml
    <root>/ILSVRC/Data/CLS-LOC/val/<ImageId>.JPEG

``PredictionString`` lists the boxes of an image, five fields each: ``<wnid> <xmin> <ymin>
<xmax> <ymax>`` (pixels), the box being ``(xmin, ymin, xmax, ymax)``; all 50,000 validation
images are listed. Without the CSV the boxes are read from the per-image XML files it was made
from (``<object><bndbox><xmin>..``, the same numbers; read safely,
:func:`gspdml.data.boxed_images.parse_xml`).
"""

from __future__ import annotations

from pathlib import Path

from gspdml.data.boxed_images import BoxedImage, boxes_array, xml_boxes
from gspdml.data.textfiles import read_csv_records, require_file
from gspdml.errors import DataError

SOURCE = "ImageNet-1k validation boxes"
SOLUTION = "LOC_val_solution.csv"
IMAGES = Path("ILSVRC", "Data", "CLS-LOC", "val")
ANNOTATIONS = Path("ILSVRC", "Annotations", "CLS-LOC", "val")
#: the validation images
VAL_IMAGES = 50000


def read_imagenet_boxes(root: str) -> list[BoxedImage]:
    """Every validation image with its boxes, sorted by image id: from ``LOC_val_solution.csv``,
    else from the XML annotations (module doc)."""
    base = Path(root).expanduser()
    if not (base / SOLUTION).is_file() and (base / ANNOTATIONS).is_dir():
        return _from_xml(base)
    path = require_file(base / SOLUTION, SOURCE)
    records = read_csv_records(path)
    if not records or [f.strip() for f in records[0][1]] != ["ImageId", "PredictionString"]:
        raise DataError(f"{path}:1: expected the header ImageId,PredictionString")
    out = []
    for line, fields in records[1:]:
        if len(fields) != 2:
            raise DataError(f"{path}:{line}: expected 2 fields (ImageId, PredictionString)")
        image, text = fields[0].strip(), fields[1].split()
        if not image or not text or len(text) % 5:
            raise DataError(
                f"{path}:{line}: PredictionString {fields[1]!r} is not groups of "
                "'<wnid> <xmin> <ymin> <xmax> <ymax>'"
            )
        try:
            rows = [
                (float(text[i + 1]), float(text[i + 2]), float(text[i + 3]), float(text[i + 4]))
                for i in range(0, len(text), 5)
            ]
        except ValueError:
            raise DataError(f"{path}:{line}: a box coordinate is not a number") from None
        out.append(BoxedImage(base / IMAGES / f"{image}.JPEG", boxes_array(rows, f"{path}:{line}")))
    return sorted(out, key=lambda item: item.path.name)


def _from_xml(base: Path) -> list[BoxedImage]:
    """The boxes of every ``<ImageId>.xml`` of the validation annotations, sorted by id."""
    paths = sorted((base / ANNOTATIONS).glob("*.xml"))
    if not paths:
        raise DataError(f"{SOURCE}: no XML annotation in {base / ANNOTATIONS}")
    return [BoxedImage(base / IMAGES / f"{p.stem}.JPEG", xml_boxes(p)) for p in paths]
