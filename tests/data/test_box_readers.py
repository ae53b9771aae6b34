"""The readers of the localisation, object-discovery and background-robustness datasets on tiny
trees in their official layouts (tests/helpers/box_datasets.py): CUB-200-2011's test boxes, the
ImageNet validation boxes, PASCAL VOC's objects (XML read without entities) and ImageNet-9."""

import pytest

from gspdml.data.coco20k import read_coco20k_boxes
from gspdml.data.cub_boxes import read_cub_boxes
from gspdml.data.imagenet9 import CLASSES, IN_TO_IN9, VARIATIONS, read_imagenet9
from gspdml.data.imagenet_boxes import read_imagenet_boxes
from gspdml.data.voc import read_voc_boxes
from gspdml.errors import DataError
from tests.helpers.box_datasets import (
    make_coco20k,
    make_cub_boxes,
    make_imagenet9,
    make_imagenet_boxes,
    make_voc,
    voc_xml,
)


def test_cub_boxes_are_the_test_images_with_x_y_width_height_as_corners(tmp_path):
    base, boxes = make_cub_boxes(tmp_path)
    items = read_cub_boxes(str(tmp_path / "CUB_200_2011"))
    lines = [line.split() for line in (base / "images.txt").read_text().splitlines()]
    test = [(int(i), path) for i, path in lines if int(i) % 2 == 0]  # is_training = id % 2
    assert [item.path for item in items] == [base / "images" / path for _, path in test]
    assert [item.boxes.tolist() for item in items] == [[list(boxes[i])] for i, _ in test]
    (base / "bounding_boxes.txt").write_text("1 0 0 5 5\n")
    with pytest.raises(DataError, match="bounding_boxes.txt: no box for test image 2"):
        read_cub_boxes(str(base))


def test_imagenet_boxes_every_box_of_every_image_sorted_by_id(tmp_path):
    boxes = make_imagenet_boxes(tmp_path)
    items = read_imagenet_boxes(str(tmp_path / "imagenet"))
    assert [item.path.name for item in items] == [f"{name}.JPEG" for name in sorted(boxes)]
    assert [item.boxes.tolist() for item in items] == [
        [list(b) for b in boxes[name]] for name in sorted(boxes)
    ]
    assert all(item.path.is_file() for item in items)
    solution = tmp_path / "imagenet" / "LOC_val_solution.csv"
    solution.unlink()  # the same boxes from the per-image XML files
    from_xml = read_imagenet_boxes(str(tmp_path / "imagenet"))
    assert [(i.path, i.boxes.tolist()) for i in from_xml] == [
        (i.path, i.boxes.tolist()) for i in items
    ]
    solution.write_text("ImageId,PredictionString\nILSVRC2012_val_00000001,n01 1 2 3\n")
    with pytest.raises(DataError, match="LOC_val_solution.csv:2: PredictionString"):
        read_imagenet_boxes(str(tmp_path / "imagenet"))


def test_voc_objects_of_the_trainval_list_with_one_based_corners(tmp_path):
    objects = make_voc(tmp_path, "2007")
    items = read_voc_boxes(str(tmp_path / "VOCdevkit"), "2007")
    assert [item.path.stem for item in items] == list(objects)  # the test image is not read
    for item, boxes in zip(items, objects.values()):
        assert item.boxes.tolist() == [[b[0] - 1, b[1] - 1, b[2], b[3]] for b in boxes]
    with pytest.raises(DataError, match="VOC2012: missing Annotations"):
        read_voc_boxes(str(tmp_path / "VOCdevkit"), "2012")


def test_voc_xml_with_a_doctype_or_entity_is_refused_and_a_bad_field_named(tmp_path):
    objects = make_voc(tmp_path, "2012", count=1)
    (name,) = objects
    path = tmp_path / "VOCdevkit" / "VOC2012" / "Annotations" / f"{name}.xml"
    bomb = '<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "xxxxxxxx">]>'
    path.write_text(bomb + voc_xml(name, (64, 48), [(1, 1, 5, 5)]).replace("dog", "&x;"))
    with pytest.raises(DataError, match="document type declaration"):
        read_voc_boxes(str(tmp_path / "VOCdevkit"), "2012")
    path.write_text(voc_xml(name, (64, 48), [(1, 1, 5, 5)]).replace("<xmax>5", "<xmax>five"))
    with pytest.raises(DataError, match=f"{name}.xml: field xmax is 'five'"):
        read_voc_boxes(str(tmp_path / "VOCdevkit"), "2012")


def test_imagenet9_variations_classes_and_the_imagenet_mapping(tmp_path):
    make_imagenet9(tmp_path, per_class=2)
    for variation in VARIATIONS.values():
        items = read_imagenet9(str(tmp_path), variation)
        assert [label for _, label in items] == [c for c in range(9) for _ in range(2)]
        assert all(path.parent.name.startswith(f"{label:02d}_") for path, label in items)
    # the challenge's in_to_in9.json: 370 of the 1000 classes, each super-class's extremes
    assert len(IN_TO_IN9) == 1000 and sum(c >= 0 for c in IN_TO_IN9) == 370
    counts = [IN_TO_IN9.count(c) for c in range(len(CLASSES))]
    assert counts == [116, 52, 42, 36, 35, 27, 26, 20, 16]
    assert [IN_TO_IN9[i] for i in (151, 171, 268, 7, 25, 880, 889, 397, 999)] == [
        0,
        -1,
        0,
        1,
        -1,
        2,
        6,
        8,
        -1,
    ]
    (tmp_path / "bg_challenge" / "original" / "val" / "09_extra").mkdir()
    with pytest.raises(DataError, match="09_extra: class folder 10 of 10"):
        read_imagenet9(str(tmp_path), "original")


def test_coco20k_the_listed_images_with_their_boxes_but_crowds(tmp_path):
    expected = make_coco20k(tmp_path)
    items = read_coco20k_boxes(str(tmp_path / "COCO"))
    assert [item.path.name for item in items] == list(expected)
    assert [item.boxes.tolist() for item in items] == [
        [list(map(float, b)) for b in boxes] for boxes in expected.values()
    ]
    assert all(item.path.is_file() for item in items)
    (tmp_path / "COCO" / "coco_20k_filenames.txt").write_text("train2014/COCO_train2014_x.jpg\n")
    with pytest.raises(DataError, match="is not a COCO file name"):
        read_coco20k_boxes(str(tmp_path / "COCO"))
