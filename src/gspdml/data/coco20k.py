"""COCO-20k, the object-discovery benchmark of LOST (Siméoni et al., BMVC 2021, §4: 19,817
images of COCO 2014 train, listed in LOST's ``datasets/coco_20k_filenames.txt``), read from the
official COCO 2014 release and that list::

    <root>/coco_20k_filenames.txt                 one file name a line, COCO_train2014_<id>.jpg
    <root>/annotations/instances_train2014.json   the release's instances
    <root>/train2014/COCO_train2014_<id>.jpg

An image's boxes are its annotations that are not crowds (``iscrowd`` 0), as LOST's evaluation
keeps them: ``bbox`` ``[x, y, width, height]`` is ``(x, y, x + width, y + height)``, each
rounded to the nearest integer. An image of the list with no such box is kept with none: its
CorLoc is a miss.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gspdml.data.boxed_images import BoxedImage, boxes_array
from gspdml.data.textfiles import read_text, require_file
from gspdml.errors import DataError

SOURCE = "COCO-20k"
LISTING = "coco_20k_filenames.txt"
INSTANCES = Path("annotations", "instances_train2014.json")
#: the images of LOST's list
IMAGES = 19817


def _image_id(name: str, listing: Path) -> int:
    stem = Path(name).stem
    number = stem.rsplit("_", 1)[-1]
    if not number.isdigit():
        raise DataError(f"{listing}: {name!r} is not a COCO file name COCO_train2014_<id>.jpg")
    return int(number)


def read_coco20k_boxes(root: str) -> list[BoxedImage]:
    """The images of LOST's list, in its order, with their boxes (module doc)."""
    base = Path(root).expanduser()
    listing = require_file(base / LISTING, SOURCE)
    names = [Path(line.strip()).name for line in read_text(listing).splitlines() if line.strip()]
    wanted = {_image_id(name, listing): name for name in names}
    path = require_file(base / INSTANCES, SOURCE)
    try:
        instances = json.loads(read_text(path))
        annotations = instances["annotations"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise DataError(f"{path}: not a COCO instances file ({error})") from None
    boxes: dict[int, list[tuple[float, float, float, float]]] = {i: [] for i in wanted}
    for number, annotation in enumerate(annotations):
        image = annotation.get("image_id") if isinstance(annotation, dict) else None
        if image not in boxes or annotation.get("iscrowd", 0):
            continue
        bbox = annotation.get("bbox")
        if not isinstance(bbox, list) or len(bbox) != 4:
            raise DataError(
                f"{path}: annotations[{number}].bbox is {bbox!r}, expected [x, y, w, h]"
            )
        x, y, w, h = (float(v) for v in bbox)
        boxes[image].append(
            (float(round(x)), float(round(y)), float(round(x + w)), float(round(y + h)))
        )
    return [
        BoxedImage(
            base / "train2014" / name,
            boxes_array(boxes[i], str(path)) if boxes[i] else np.zeros((0, 4)),
        )
        for i, name in wanted.items()
    ]
