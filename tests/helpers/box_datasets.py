"""Tiny trees in the official layouts of the localisation, object-discovery and background
datasets: CUB-200-2011 with ``bounding_boxes.txt``, the ImageNet CLS-LOC validation release
(``LOC_val_solution.csv``), PASCAL VOC (``Annotations/*.xml``, ``ImageSets/Main``), COCO-20k
(COCO 2014 train and LOST's list) and the backgrounds challenge
(``bg_challenge/<variation>/val/NN_name``)."""

import functools
import json

import numpy as np

from gspdml.data.imagenet9 import CLASSES, VARIATIONS
from tests.helpers.datasets import make_cub, write_image


def _box(rng, width, height):
    x0, y0 = int(rng.integers(0, width // 2)), int(rng.integers(0, height // 2))
    return x0, y0, int(rng.integers(x0 + 4, width)), int(rng.integers(y0 + 4, height))


def make_cub_boxes(root, size=(60, 40), classes=2, per_class=3, seed=0):
    """CUB_200_2011 (tests/helpers/datasets.py) with images of ``size`` and one box each
    (``x y width height``); returns the folder and {image id: (x0, y0, x1, y1)}."""
    base = make_cub(root, functools.partial(write_image, size=size), classes, per_class)
    rng = np.random.default_rng(seed)
    count = len((base / "images.txt").read_text().split("\n")) - 1
    boxes = {i: _box(rng, *size) for i in range(1, count + 1)}
    lines = [f"{i} {b[0]}.0 {b[1]}.0 {b[2] - b[0]}.0 {b[3] - b[1]}.0" for i, b in boxes.items()]
    (base / "bounding_boxes.txt").write_text("\n".join(lines) + "\n")
    return base, boxes


def voc_xml(name, size, boxes):
    objects = "".join(
        f"<object><name>dog</name><difficult>{i % 2}</difficult><bndbox><xmin>{b[0]}</xmin>"
        f"<ymin>{b[1]}</ymin><xmax>{b[2]}</xmax><ymax>{b[3]}</ymax></bndbox></object>"
        for i, b in enumerate(boxes)
    )
    return (
        f"<annotation><folder>VOC</folder><filename>{name}.jpg</filename><size><width>{size[0]}"
        f"</width><height>{size[1]}</height><depth>3</depth></size>{objects}</annotation>"
    )


def make_voc(root, year, count=4, size=(64, 48), seed=0):
    """``VOCdevkit/VOC<year>`` with ``count`` trainval images (one or two objects each, VOC's
    1-based corners) and one test image; returns {image id: [(xmin, ymin, xmax, ymax), ..]}."""
    base = root / "VOCdevkit" / f"VOC{year}"
    (base / "ImageSets" / "Main").mkdir(parents=True)
    (base / "Annotations").mkdir()
    rng = np.random.default_rng(seed)
    names = [f"{year}_{i:06d}" for i in range(count + 1)]
    objects = {}
    for i, name in enumerate(names):
        boxes = [tuple(v + 1 for v in _box(rng, *size)) for _ in range(1 + i % 2)]
        if i % 2:  # a large object too: some boxes found from 16-pixel patches can match
            boxes[0] = (1, 1, size[0] // (1 + i % 4 // 2), size[1])  # whole, left half
        objects[name] = boxes
        (base / "Annotations" / f"{name}.xml").write_text(voc_xml(name, size, boxes))
        write_image(base / "JPEGImages" / f"{name}.jpg", size=size, fmt="JPEG", seed=i)
    (base / "ImageSets" / "Main" / "trainval.txt").write_text("\n".join(names[:-1]) + "\n")
    (base / "ImageSets" / "Main" / "test.txt").write_text(names[-1] + "\n")
    return {name: objects[name] for name in names[:-1]}


def make_imagenet_boxes(root, count=3, size=(50, 40), seed=0):
    """``imagenet/LOC_val_solution.csv`` and its validation images; returns {id: boxes}."""
    base = root / "imagenet"
    rng = np.random.default_rng(seed)
    lines, boxes = ["ImageId,PredictionString"], {}
    for i in range(count):
        name = f"ILSVRC2012_val_{i + 1:08d}"
        boxes[name] = [_box(rng, *size) for _ in range(1 + i % 2)]
        fields = " ".join(f"n0{1440764 + i} {b[0]} {b[1]} {b[2]} {b[3]}" for b in boxes[name])
        lines.append(f"{name},{fields} ")
        path = base / "ILSVRC" / "Data" / "CLS-LOC" / "val" / f"{name}.JPEG"
        write_image(path, size=size, fmt="JPEG", seed=i)
    for name, objects in boxes.items():  # the XML files the CSV was made from
        xml = voc_xml(name, size, objects).replace("<folder>VOC", "<folder>val")
        path = base / "ILSVRC" / "Annotations" / "CLS-LOC" / "val" / f"{name}.xml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(xml)
    # the release's rows are not sorted: the reader sorts them by image id
    (base / "LOC_val_solution.csv").write_text("\n".join([lines[0], *lines[:0:-1]]) + "\n")
    return boxes


def make_imagenet9(root, per_class=1, size=(48, 48)):
    """``bg_challenge`` with every variation: ``per_class`` images of each of the 9 classes."""
    base = root / "bg_challenge"
    for v, variation in enumerate(VARIATIONS.values()):
        for c, name in enumerate(CLASSES):
            for i in range(per_class):
                path = base / variation / "val" / f"{c:02d}_{name}" / f"img_{i}.JPEG"
                write_image(path, size=size, fmt="JPEG", seed=100 * v + 10 * c + i)
    return base


def make_coco20k(root, count=3, size=(48, 48), seed=0):
    """``COCO`` with LOST's list of ``count`` train2014 images (and one image off the list), the
    instances file (a crowd annotation and one of an image off the list among them); returns
    {file name: [(x0, y0, x1, y1) rounded, ..]} of the listed images."""
    base = root / "COCO"
    rng = np.random.default_rng(seed)
    names = [f"COCO_train2014_{100 + 7 * i:012d}.jpg" for i in range(count + 1)]
    annotations, expected = [], {}
    for i, name in enumerate(names):
        write_image(base / "train2014" / name, size=size, fmt="JPEG", seed=i)
        boxes = []
        for _ in range(1 + i % 2):
            x0, y0, x1, y1 = _box(rng, *size)
            bbox = [x0 + 0.4, y0 + 0.6, x1 - x0 + 0.2, y1 - y0]
            annotations.append({"image_id": 100 + 7 * i, "bbox": bbox, "iscrowd": 0})
            boxes.append(
                (round(bbox[0]), round(bbox[1]), round(bbox[0] + bbox[2]), round(bbox[1] + bbox[3]))
            )
        annotations.append({"image_id": 100 + 7 * i, "bbox": [0, 0, 48, 48], "iscrowd": 1})
        expected[name] = boxes
    (base / "annotations").mkdir(parents=True)
    instances = {"images": [], "annotations": annotations, "categories": []}
    (base / "annotations" / "instances_train2014.json").write_text(json.dumps(instances))
    (base / "coco_20k_filenames.txt").write_text("".join(f"train2014/{n}\n" for n in names[:-1]))
    return {name: expected[name] for name in names[:-1]}
