"""``scripts/rehearse.py`` writes each dataset's official layout with one generator
(``scripts/rehearsal_data.py``). At full size each layout has the published counts; here each is
generated at a tiny scale through the same code and read back with the real readers
(``gspdml.data``), which must find every image, its class and its split."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gspdml.data import cars, cub, inshop, sop

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("rehearsal_data", SCRIPTS / "rehearsal_data.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["rehearsal_data"] = module  # the workers of a Pool unpickle its classes by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules["rehearsal_data"]


READERS = {
    "cub": (cub.read_cub, cub.EXPECTED),
    "cars196": (cars.read_cars, cars.EXPECTED),
    "sop": (sop.read_sop, sop.EXPECTED),
    "inshop": (inshop.read_inshop, inshop.EXPECTED),
}


SCALES = {"cub": 0.005, "cars196": 0.004, "sop": 0.001, "inshop": 0.002}


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_tiny_layout_reads_back_with_the_real_reader(generator, tmp_path, name):
    reader, expected = READERS[name]
    layout = generator.layout(name)
    # at full size: the published counts, so the readers' count checks apply
    assert generator.total_images(layout) == expected["images"]
    full = generator.scaled(layout.groups, 1.0)
    assert [g.classes for g in full] == [expected["train_classes"], expected["test_classes"]]
    scale = SCALES[name]  # about a hundred images each
    items = generator.plan(layout, scale)
    base = generator.write_layout(layout, tmp_path / name, workers=1, scale=scale)
    official = reader(str(base))
    parts = {
        part: getattr(official, part)
        for part in ("train", "test", "query", "gallery")
        if getattr(official, part) is not None
    }
    assert set(parts) == {item.part for item in items}
    for part, records in parts.items():
        mine = [i for i in items if i.part == part]
        assert sorted(records.paths) == sorted(str(base / i.path) for i in mine)
        by_path = dict(zip(records.paths, np.asarray(records.labels).tolist()))
        assert all(by_path[str(base / i.path)] == i.label for i in mine)
    assert (
        sum(len(records.paths) for records in parts.values())
        == len(items)
        == generator.total_images(layout, scale)
    )
    train = {i.label for i in items if i.part == "train"}
    test = {i.label for i in items if i.part != "train"}
    assert not train & test and min(test) > max(train)  # training classes first, disjoint
    first = items[0]
    with Image.open(base / first.path) as image:
        assert image.format == "JPEG" and image.size == layout.size(
            np.random.default_rng([first.label, first.index, sum(first.part.encode()), 0x1A6E])
        )


def test_the_spread_gives_every_class_images_and_keeps_the_total(generator):
    rng = np.random.default_rng(0)
    for images, classes in ((14218, 3985), (60502, 11316), (5, 5), (7, 3)):
        counts = generator.spread(images, classes, rng)
        assert counts.sum() == images and counts.min() >= min(2, images // classes)
