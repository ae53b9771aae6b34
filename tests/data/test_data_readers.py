"""The official layouts, on tiny trees generated here."""

import numpy as np
import pytest
import scipy.io
import torch

from gspdml.data import build_data, cub, inshop
from gspdml.data.files import ImageFileDataset
from gspdml.errors import ConfigError, DataError
from tests.helpers.datasets import (
    SMALL,
    make_cars,
    make_cars_devkit,
    make_cub,
    make_inshop,
    make_sop,
)


def test_cub_zero_shot_split_and_validation(tmp_path, write_image):
    make_cub(tmp_path, write_image, classes=8)
    data = build_data(
        {"name": "cub200", "root": str(tmp_path), "val_fraction": 0.25, **SMALL}, seed=0
    )
    train, val, test = data.train, data.val.query, data.test.query
    # classes 1-4 train (1-3 fit, 4 validation), 5-8 test; the classification split file is ignored
    assert train.class_names == ["001.Bird_1", "002.Bird_2", "003.Bird_3"]
    assert val.class_names == ["004.Bird_4"] and test.class_names == [
        f"00{c}.Bird_{c}" for c in range(5, 9)
    ]
    assert sorted(set(train.labels)) == [0, 1, 2] and sorted(set(test.labels)) == [0, 1, 2, 3]
    assert len(train) == 4 + 3 + 4 and len(val) == 3 and len(test) == 4 + 3 + 4 + 3
    assert all(f"/00{c}.Bird_{c}/" in p for p, c in zip(train.paths, train.labels + 1))
    x, y = train[0]
    assert x.shape == (3, 10, 10) and y == 0
    folds = [
        build_data(
            {"name": "cub", "root": str(tmp_path), "val_fold": f, "num_folds": 2, **SMALL}, seed=0
        )
        for f in range(2)
    ]
    # the protocol's wrap-around folds: fold 0 trains on classes 1-2 and validates on 3-4, fold 1 the reverse
    assert [f.val.query.class_names for f in folds] == [
        ["003.Bird_3", "004.Bird_4"],
        ["001.Bird_1", "002.Bird_2"],
    ]
    assert [f.train.classes.tolist() for f in folds] == [[1, 2], [3, 4]]


def test_cub_published_counts_are_asserted(tmp_path, write_image, monkeypatch):
    make_cub(tmp_path, write_image, classes=4, per_class=2)  # 3+2+3+2 = 10 images
    monkeypatch.setattr(
        cub,
        "EXPECTED",
        dict(images=10, train_images=5, test_images=5, train_classes=2, test_classes=2),
    )
    build_data({"name": "cub", "root": str(tmp_path)}, seed=0)
    monkeypatch.setattr(
        cub,
        "EXPECTED",
        dict(images=10, train_images=6, test_images=4, train_classes=2, test_classes=2),
    )
    with pytest.raises(DataError, match=r"train_images 5 \(expected 6\)"):
        build_data({"name": "cub", "root": str(tmp_path)}, seed=0)


def test_cub_errors_name_the_file(tmp_path, write_image):
    base = make_cub(tmp_path, write_image)
    (base / "image_class_labels.txt").unlink()
    with pytest.raises(DataError, match="missing file .*image_class_labels.txt"):
        build_data({"name": "cub", "root": str(tmp_path)}, seed=0)
    make_cub(tmp_path, write_image)
    with open(base / "images.txt", "a") as f:
        f.write("99 a b\n")
    with pytest.raises(DataError, match=r"images.txt:\d+: expected 2 columns"):
        build_data({"name": "cub", "root": str(tmp_path)}, seed=0)
    make_cub(tmp_path, write_image)
    lost = base / "images" / "002.Bird_2" / "img_5.jpg"
    lost.unlink()
    with pytest.raises(DataError, match=str(lost)):
        build_data({"name": "cub", "root": str(tmp_path)}, seed=0)
    with pytest.warns(UserWarning, match="skipped 1"):
        data = build_data({"name": "cub", "root": str(tmp_path), "on_error": "skip"}, seed=0)
    assert data.train.skipped == [(str(lost), "file not found")]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="missing images.txt"):
        build_data({"name": "cub", "root": str(tmp_path / "empty")}, seed=0)
    with pytest.raises(DataError, match="nowhere is not a directory"):
        build_data({"name": "cub", "root": str(tmp_path / "nowhere")}, seed=0)
    with pytest.raises(ConfigError, match="data.dataset.root"):
        build_data({"name": "cub"}, seed=0)
    with pytest.raises(ConfigError, match="data.dataset.on_error"):
        build_data({"name": "cub", "root": str(tmp_path), "on_error": "ignore"}, seed=0)


def test_cars_from_annotations(tmp_path, write_image):
    make_cars(
        tmp_path, write_image, classes=6, per_class=4
    )  # the classification flag mixes every class
    data = build_data(
        {"name": "cars196", "root": str(tmp_path), "val_fraction": 0, **SMALL}, seed=0
    )
    assert data.val is None
    assert data.train.class_names == [
        "Car 1",
        "Car 2",
        "Car 3",
    ] and data.test.query.class_names == ["Car 4", "Car 5", "Car 6"]
    assert len(data.train) == 12 and len(data.test.query) == 12
    assert data.test.query[0][0].shape == (3, 10, 10)
    scipy.io.savemat(str(tmp_path / "cars_annos.mat"), {"something": np.zeros(3)})
    with pytest.raises(DataError, match="cars_annos.mat: malformed"):
        build_data({"name": "cars", "root": str(tmp_path)}, seed=0)


def test_cars_devkit_release_merges_both_halves(tmp_path, write_image):
    halves = make_cars_devkit(tmp_path, write_image)
    data = build_data({"name": "cars", "root": str(tmp_path), "val_fraction": 0, **SMALL}, seed=0)
    assert data.train.class_names == [
        "Car 1",
        "Car 2",
        "Car 3",
    ] and data.test.query.class_names == ["Car 4", "Car 5", "Car 6"]
    # every image of both classification halves, each under its own folder, filed by its class
    expected = {str(tmp_path / folder / f): c for folder, rows in halves.items() for f, c in rows}
    listed = {
        p: int(data.train.class_names[y].split()[1])
        for p, y in zip(data.train.paths, data.train.labels)
    }
    listed |= {
        p: int(data.test.query.class_names[y].split()[1])
        for p, y in zip(data.test.query.paths, data.test.query.labels)
    }
    assert listed == expected
    (tmp_path / "cars_test_annos_withlabels.mat").rename(
        tmp_path / "devkit" / "cars_test_annos_withlabels.mat"
    )
    assert (
        len(
            build_data(
                {"name": "cars", "root": str(tmp_path), "val_fraction": 0, **SMALL}, seed=0
            ).test.query
        )
        == 12
    )
    (tmp_path / "devkit" / "cars_test_annos_withlabels.mat").unlink()
    with pytest.raises(DataError, match="devkit layout .* lacks .*cars_test_annos_withlabels.mat"):
        build_data({"name": "cars", "root": str(tmp_path)}, seed=0)


def test_cars_class_folders_follow_names_csv(tmp_path, write_image):
    base = tmp_path / "car_data" / "car_data"
    order = ["Zeta 2012", "Alpha 2010", "Mid 2011", "Beta 2009"]
    for part in ("train", "test"):
        for k, name in enumerate(order):
            write_image(base / part / name / f"{part}{k}.jpg", fmt="JPEG")
    (tmp_path / "names.csv").write_text("\n".join(order) + "\n")
    data = build_data({"name": "cars", "root": str(tmp_path), "val_fraction": 0, **SMALL}, seed=0)
    assert data.train.class_names == [
        "Zeta 2012",
        "Alpha 2010",
    ] and data.test.query.class_names == ["Mid 2011", "Beta 2009"]
    assert len(data.train) == 4 and len(data.test.query) == 4
    (tmp_path / "names.csv").unlink()
    with pytest.warns(UserWarning, match="sorted folder names"):
        data = build_data({"name": "cars", "root": str(tmp_path), "val_fraction": 0}, seed=0)
    assert data.train.class_names == ["Alpha 2010", "Beta 2009"]
    with pytest.raises(DataError, match="cars_annos.mat"):
        build_data(
            {"name": "cars", "root": str(tmp_path / "car_data" / "car_data" / "train")}, seed=0
        )


def test_sop_official_split(tmp_path, write_image):
    make_sop(tmp_path, write_image)
    data = build_data({"name": "sop", "root": str(tmp_path), "val_classes": [4], **SMALL}, seed=0)
    assert data.train.class_names == ["1", "2", "3"] and data.val.query.class_names == ["4"]
    assert len(data.test.query) == 8 and data.test.gallery is None
    assert sorted(set(data.test.query.labels)) == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match="val_classes.*not training classes"):
        build_data({"name": "sop", "root": str(tmp_path), "val_classes": [7]}, seed=0)


def test_sop_refuses_shared_classes(tmp_path, write_image):
    make_sop(tmp_path, write_image, shared=True)
    with pytest.raises(DataError, match="classification split"):
        build_data({"name": "sop", "root": str(tmp_path)}, seed=0)


def test_inshop_query_and_gallery(tmp_path, write_image):
    make_inshop(tmp_path, write_image)
    data = build_data(
        {"name": "inshop", "root": str(tmp_path), "val_fraction": 0.25, **SMALL}, seed=0
    )
    query, gallery = data.test.query, data.test.gallery
    assert (
        len(data.train) == 9 and len(data.val.query) == 3 and len(query) == 4 and len(gallery) == 8
    )
    # the same item has the same label in query and gallery
    assert query.class_names == gallery.class_names == [f"id_{i:08d}" for i in range(5, 9)]
    for path, label in zip(gallery.paths, gallery.labels):
        assert f"id_{label + 5:08d}" in path
    assert set(query.labels) == set(gallery.labels) == {0, 1, 2, 3}
    assert not set(data.train.class_names) & set(query.class_names)


def test_inshop_published_counts_are_asserted(tmp_path, write_image, monkeypatch):
    make_inshop(tmp_path, write_image)
    counts = dict(
        images=24,
        train_images=12,
        query_images=4,
        gallery_images=8,
        train_classes=4,
        test_classes=4,
    )
    monkeypatch.setattr(inshop, "EXPECTED", counts)
    build_data({"name": "inshop", "root": str(tmp_path)}, seed=0)
    monkeypatch.setattr(inshop, "EXPECTED", {**counts, "test_classes": 3985})
    with pytest.raises(DataError, match=r"test_classes 4 \(expected 3985\)"):
        build_data({"name": "inshop", "root": str(tmp_path)}, seed=0)


def test_inshop_count_line_is_checked(tmp_path, write_image):
    make_inshop(tmp_path, write_image, declared=99)
    with pytest.raises(
        DataError, match=r"list_eval_partition.txt:1: declares '99' entries but lists 24"
    ):
        build_data({"name": "inshop", "root": str(tmp_path)}, seed=0)


def test_image_folder_and_errors(tmp_path, write_image):
    for c in ["cat", "dog", "eel", "fox"]:
        for k in range(3):
            write_image(tmp_path / "pets" / c / f"{k}.png")
    (tmp_path / "pets" / "fox" / "notes.txt").write_text("not an image")
    data = build_data(
        {"name": "image_folder", "root": str(tmp_path / "pets"), "val_fraction": 0, **SMALL}, seed=0
    )
    assert data.train.class_names == ["cat", "dog"] and data.test.query.class_names == [
        "eel",
        "fox",
    ]
    assert len(data.test.query) == 6
    (tmp_path / "pets" / "dog" / "1.png").write_bytes(b"broken")
    with pytest.raises(DataError, match="dog/1.png"):
        build_data({"name": "folder", "root": str(tmp_path / "pets"), "check": "header"}, seed=0)
    with pytest.warns(UserWarning, match="skipped 1"):
        data = build_data(
            {
                "name": "folder",
                "root": str(tmp_path / "pets"),
                "check": "header",
                "on_error": "skip",
                "val_fraction": 0,
            },
            seed=0,
        )
    assert len(data.train) == 5
    for split, classes in {"train": ["a", "b"], "test": ["b", "c"]}.items():
        for c in classes:
            write_image(tmp_path / "own" / split / c / "x.png")
    with pytest.raises(DataError, match="classes are in both the train and the evaluation split"):
        build_data({"name": "folder", "root": str(tmp_path / "own")}, seed=0)


def test_csv_with_query_gallery_and_own_validation(tmp_path, write_image):
    rows = ["path,label,split"]
    for label, split in [("7", "train"), ("8", "train"), ("9", "val")]:
        for k in range(2):
            rows.append(f"imgs/{label}_{k}.png,{label},{split}")
    for label in ("10", "11"):
        rows += [f"imgs/{label}_q.png,{label},query", f"imgs/{label}_g.png,{label},gallery"]
    for row in rows[1:]:
        write_image(tmp_path / row.split(",")[0])
    (tmp_path / "list.csv").write_text("\n".join(rows) + "\n")
    data = build_data({"name": "csv", "path": str(tmp_path / "list.csv"), **SMALL}, seed=0)
    assert data.train.class_names == ["7", "8"] and data.val.query.class_names == ["9"]
    assert data.test.query.labels.tolist() == [0, 1] and data.test.gallery.labels.tolist() == [0, 1]
    with pytest.raises(ConfigError, match="own validation split"):
        build_data({"name": "csv", "path": str(tmp_path / "list.csv"), "val_fold": 0}, seed=0)
    (tmp_path / "bad.csv").write_text("path,label,split\na.png,1,train\nb.png,2,holdout\n")
    with pytest.raises(DataError, match=r"bad.csv:3: unknown split 'holdout'"):
        build_data({"name": "csv", "path": str(tmp_path / "bad.csv")}, seed=0)
    (tmp_path / "nohead.csv").write_text("file,class\na.png,1\n")
    with pytest.raises(DataError, match=r"nohead.csv:1: the header must name"):
        build_data({"name": "csv", "path": str(tmp_path / "nohead.csv")}, seed=0)


def test_decode_failure_at_load_time(tmp_path, write_image):
    paths = [write_image(tmp_path / f"{k}.png", seed=k) for k in range(4)]
    open(paths[1], "wb").write(b"garbage")
    strict = ImageFileDataset(paths, [0, 0, 1, 1], check="none")
    with pytest.raises(DataError, match=paths[1]):
        strict[1]
    lenient = ImageFileDataset(paths, [0, 0, 1, 1], check="none", on_error="skip")
    with pytest.warns(UserWarning, match=f"using {paths[0]}"):
        x, y = lenient[1]
    assert y == 0 and torch.equal(x, lenient[0][0])
