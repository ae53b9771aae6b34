"""The CUB-200-2011 test images with their bounding boxes, in the official layout
(``CUB_200_2011.tgz``), as the weakly supervised localisation benchmark reads them (Choe et al.,
"Evaluating Weakly Supervised Object Localization Methods Right", CVPR 2020, §5: the 5,794
test images of the official classification split)::

    <root>/[CUB_200_2011/]images.txt            "<image_id> <relative path>"
    <root>/[CUB_200_2011/]train_test_split.txt  "<image_id> <is_training_image 0|1>"
    <root>/[CUB_200_2011/]bounding_boxes.txt    "<image_id> <x> <y> <width> <height>"
    <root>/[CUB_200_2011/]images/<path>

A box ``x y width height`` (pixels, top-left corner) is ``(x, y, x + width, y + height)``.
"""

from __future__ import annotations

from typing import NamedTuple

from gspdml.data.boxed_images import BoxedImage, boxes_array
from gspdml.data.textfiles import find_dir, read_columns
from gspdml.errors import DataError

SOURCE = "CUB-200-2011 boxes"
#: the test images of the official split
TEST_IMAGES = 5794


class _Image(NamedTuple):
    id: int
    path: str


class _Split(NamedTuple):
    id: int
    is_training: int


class _Box(NamedTuple):
    id: int
    x: str
    y: str
    width: str
    height: str


def read_cub_boxes(root: str) -> list[BoxedImage]:
    """The test images of CUB-200-2011's official split with their box, in ``images.txt``'s
    order (module doc); ``root`` is the dataset's folder."""
    base = find_dir(root, "bounding_boxes.txt", [".", "CUB_200_2011"], SOURCE)
    images = read_columns(base / "images.txt", _Image, SOURCE)
    split = dict(read_columns(base / "train_test_split.txt", _Split, SOURCE))
    boxes: dict[int, list[tuple[float, float, float, float]]] = {}
    path = base / "bounding_boxes.txt"
    for box in read_columns(path, _Box, SOURCE):
        try:
            x, y, w, h = (float(v) for v in (box.x, box.y, box.width, box.height))
        except ValueError:
            raise DataError(f"{path}: image {box.id}: box {box[1:]} is not four numbers") from None
        boxes.setdefault(box.id, []).append((x, y, x + w, y + h))
    out = []
    for image in images:
        if image.id not in split:
            raise DataError(f"{base / 'train_test_split.txt'}: no line for image {image.id}")
        if split[image.id] != 0:
            continue
        if image.id not in boxes:
            raise DataError(f"{path}: no box for test image {image.id} ({image.path})")
        out.append(
            BoxedImage(base / "images" / image.path, boxes_array(boxes[image.id], str(path)))
        )
    return out
