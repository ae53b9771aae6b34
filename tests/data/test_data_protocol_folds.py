"""The fair-protocol presets on tiny trees in each official layout: they validate, every reader
exposes its training class ids, and the model of fold f trains and validates on exactly the
classes of the protocol's fold f (the reference wrap-around rule, written out here)."""

import json

import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from gspdml.cli import main
from gspdml.config import PRESETS_DIR, load_config
from gspdml.data import DATASETS, DataSplits, EvalSplit, build_data
from gspdml.data.arrays import ArrayDataset
from gspdml.errors import ConfigError
from gspdml.workflows.protocol import plan_protocol
from tests.helpers.datasets import SMALL, make_cars, make_cub, make_inshop, make_sop

CONFIGS = PRESETS_DIR


LAYOUTS = {  # dataset -> (tree generator, original ids of the training classes)
    "cub": (lambda root, w: make_cub(root, w, classes=8), [1, 2, 3, 4]),
    "cars": (make_cars, [1, 2, 3, 4]),
    "sop": (make_sop, [1, 2, 3, 4]),
    "inshop": (make_inshop, [1, 2, 3, 4]),
}


def reference_folds(ids, num_folds):
    """Fold f: the training block starts at position int(f / F * T) of the sorted ids and runs
    T - T // F classes, wrapping around; the next T // F classes validate (powerful-benchmarker's MLRCSplitManager)."""
    t = len(ids)
    folds = []
    for f in range(num_folds):
        start = int(f / num_folds * t)
        order = [ids[(start + k) % t] for k in range(t)]
        folds.append((sorted(order[: t - t // num_folds]), sorted(order[t - t // num_folds :])))
    return folds


@pytest.mark.parametrize("dataset", sorted(LAYOUTS))
def test_fair_presets_train_each_fold_on_its_classes(dataset, tmp_path, write_image, capsys):
    make_tree, train_ids = LAYOUTS[dataset]
    make_tree(tmp_path / "data", write_image)
    overrides = [
        f"data.dataset.root={tmp_path / 'data'}",
        f"data.dataset.resize={SMALL['resize']}",
        f"data.dataset.crop={SMALL['crop']}",
    ]
    presets = sorted(CONFIGS.glob(f"{dataset}-fair-*.yaml"))
    assert len(presets) >= 10  # every fair row of GSP Table 2 and its baselines (and Table 4's)
    # every fair preset of a dataset reads its data the same way; the folds are checked per
    # distinct data section (one here), not per preset
    sections = {}
    for preset in presets:
        assert main(["config", str(preset), *overrides]) == 0
        assert f"root: {tmp_path / 'data'}" in capsys.readouterr().out
        section = load_config(preset, overrides)["data"]["dataset"]
        sections.setdefault(json.dumps(section, sort_keys=True), preset)
    assert len(sections) == 1
    for preset in sections.values():
        runs, folds = plan_protocol(
            load_config(preset, overrides), "fair", (0, 1), tmp_path / "runs"
        )
        expected = reference_folds(train_ids, 4)
        assert [(f.train_classes.tolist(), f.val_classes.tolist()) for f in folds] == expected
        assert [r.name for r in runs] == [f"fold{f}-seed{s}" for f in range(4) for s in (0, 1)]
        for run in runs[::2]:
            assert (
                run.config["data"]["dataset"]["val_fold"] == run.fold
                and run.config["evaluation"]["split"] == "val"
            )
            data = build_data(run.config["data"]["dataset"], seed=run.seed)
            assert (data.train.classes.tolist(), data.val.query.classes.tolist()) == expected[
                run.fold
            ]
            assert sorted(set(data.train.labels)) == [0, 1, 2]  # relabelled for training


def test_folder_and_csv_folds_use_the_original_class_ids(tmp_path, write_image):
    for c in range(16):  # class folders "100".."115": 8 training classes, 8 test classes
        write_image(tmp_path / "pets" / str(100 + c) / "a.png", seed=c)
    rows = ["path,label,split"] + [
        f"pets/{100 + c}/a.png,{100 + c},{'train' if c < 8 else 'test'}" for c in range(16)
    ]
    (tmp_path / "list.csv").write_text("\n".join(rows) + "\n")
    expected = reference_folds(list(range(100, 108)), 5)
    for spec in (
        {"name": "image_folder", "root": str(tmp_path / "pets")},
        {"name": "csv", "path": str(tmp_path / "list.csv")},
    ):
        runs, folds = plan_protocol(
            load_config({"data": {"dataset": {**spec, **SMALL}}}), "tuning", (0,), tmp_path / "runs"
        )
        assert [(f.train_classes.tolist(), f.val_classes.tolist()) for f in folds] == expected[
            :1
        ]  # one 4/5 split
        data = build_data(runs[0].config["data"]["dataset"], seed=0)
        assert (data.train.classes.tolist(), data.val.query.classes.tolist()) == expected[0]
    rows.append(f"{write_image(tmp_path / 'held_out' / 'b.png')},999,val")
    (tmp_path / "own_val.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(
        ConfigError, match="own validation split.*move the 'val' images into 'train'"
    ):
        plan_protocol(
            load_config(
                {"data": {"dataset": {"name": "csv", "path": str(tmp_path / "own_val.csv")}}}
            ),
            "fair",
            (0,),
            tmp_path / "runs",
        )


def test_every_training_split_exposes_its_original_class_ids(tmp_path, write_image):
    make_cub(tmp_path, write_image, classes=8)
    data = build_data({"name": "cub", "root": str(tmp_path), "val_classes": [2], **SMALL}, seed=0)
    assert data.train.classes.tolist() == [1, 3, 4] and data.val.query.classes.tolist() == [2]
    assert data.test.query.classes.tolist() == [5, 6, 7, 8]
    collage = build_data(
        {
            "name": "collage_digits",
            "images_per_class": 2,
            "class_split": [8, 0, 4],
            "background_split": [4, 0, 3],
            "augment": True,
            "cache": False,
            "val_fold": 1,
        },
        seed=0,
    )
    assert collage.train.classes.tolist() == [
        2,
        3,
        4,
        5,
        6,
        7,
    ] and collage.val.query.classes.tolist() == [0, 1]
    assert sorted(set(collage.train.labels)) == list(range(6)) and collage.train[(0, 3)][
        0
    ].shape == (1, 32, 32)


def test_datasets_that_cannot_follow_the_protocol_are_named(tmp_path, monkeypatch):
    def seen_classes(seed: int = 0) -> DataSplits:  # a classification dataset: no validation folds
        split = ArrayDataset(np.zeros((4, 2, 2), np.uint8), np.array([0, 0, 1, 1]))
        return DataSplits(train=split, test=EvalSplit(split))

    def unlabelled(seed: int = 0, val_fold=None, num_folds: int = 4) -> DataSplits:
        split = EvalSplit(ArrayDataset(np.zeros((4, 2, 2), np.uint8), np.array([0, 0, 1, 1])))
        return DataSplits(train=TensorDataset(torch.zeros(2)), val=split, test=split)

    monkeypatch.setitem(DATASETS._entries, "seen_classes", seen_classes)
    monkeypatch.setitem(DATASETS._entries, "unlabelled", unlabelled)
    with pytest.raises(
        ConfigError, match="data.dataset.name: dataset 'seen_classes' has no val_fold option"
    ):
        plan_protocol(
            load_config({"data": {"dataset": {"name": "seen_classes"}}}), "fair", (0,), tmp_path
        )
    with pytest.raises(ConfigError, match="dataset 'unlabelled' does not expose the class ids"):
        plan_protocol(
            load_config({"data": {"dataset": {"name": "unlabelled"}}}), "tuning", (0,), tmp_path
        )
    runs, folds = plan_protocol(
        load_config({"data": {"dataset": {"name": "seen_classes"}}}), "conventional", (3,), tmp_path
    )
    assert (
        folds == []
        and [r.name for r in runs] == ["seed3"]
        and runs[0].config["evaluation"]["split"] == "test"
    )
