"""A trained run travels: the trainer records its evaluation transform in config.yaml, so encoding,
indexing, search, reports, exports and bundles need neither its training images nor a
hand-written config (issue 27 defect 2; issue 28 items 1 and 2)."""

import json

import pytest
import torch
import yaml
from PIL import Image

import gspdml
from gspdml.cli import main
from gspdml.config import load_config
from gspdml.data import build_data
from gspdml.data.eval_transform import dataset_eval_transform, parse_eval_transform
from gspdml.data.images import DECODING
from gspdml.errors import ConfigError
from gspdml.retrieval import Encoder, RetrievalIndex
from gspdml.training import train
from gspdml.training.config_changes import config_differences
from gspdml.workflows.runner import PlannedRun, existing_status
from tests.helpers.images import folder_config, image_folder
from tests.helpers.retrieval import (
    EVAL_TRANSFORM,
    FOLDER_OPTIONS,
    run_cli,
    train_run,
    write_image_folder,
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``(training images, run directory)`` of a run the real trainer trained on an image folder."""
    root = tmp_path_factory.mktemp("trained")
    return root / "images", train_run(root / "images", root / "run", **FOLDER_OPTIONS)


def saved_config(run):
    return yaml.safe_load((run / "config.yaml").read_text())


def test_the_trainer_records_the_datasets_eval_transform(trained):
    """Fails on the old trainer: its config.yaml had no data.eval_transform (load_config refused
    the key), so every reader of the run rebuilt the training dataset to find the transform."""
    images, run = trained
    saved = saved_config(run)
    assert saved["data"]["eval_transform"] == EVAL_TRANSFORM  # what the write_run helper writes
    test_images = build_data(saved["data"]["dataset"], seed=saved["seed"]).test.query
    recorded = parse_eval_transform(saved["data"]["eval_transform"], channels=3)
    assert recorded == dataset_eval_transform(test_images) == test_images.transform
    assert load_config(run / "config.yaml")["data"]["eval_transform"] == EVAL_TRANSFORM


def test_a_null_eval_transform_is_the_recorded_one_for_reuse_and_resume(trained):
    images, run = trained
    requested = load_config(folder_config(images, run.parent, **FOLDER_OPTIONS))
    assert requested["data"]["eval_transform"] is None
    assert config_differences(saved_config(run), requested) == {}
    assert existing_status(PlannedRun("run", requested, run)) == "done"
    other = {**EVAL_TRANSFORM, "resize": [40]}
    changed = load_config({**requested, "data": {**requested["data"], "eval_transform": other}})
    assert "data.eval_transform.resize" in config_differences(saved_config(run), changed)


def test_the_trainer_refuses_an_eval_transform_that_contradicts_the_dataset(tmp_path):
    image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    config = folder_config(tmp_path / "images", tmp_path, **FOLDER_OPTIONS)
    config["data"]["eval_transform"] = {**EVAL_TRANSFORM, "center_crop": 28}
    with pytest.raises(ConfigError, match="data.eval_transform: .* differs from the evaluation"):
        train(load_config(config), tmp_path / "run")
    assert not (tmp_path / "run" / "config.yaml").exists()


def recording_opens(monkeypatch):
    """Every path PIL opens from now on."""
    opened, real_open = [], Image.open

    def open_and_record(fp, *args, **kwargs):
        opened.append(str(fp))
        return real_open(fp, *args, **kwargs)

    monkeypatch.setattr(Image, "open", open_and_record)
    return opened


def test_a_run_works_without_its_training_images(trained, tmp_path, monkeypatch):
    """Fails on the old code: Encoder.from_run, index, search, report, export and bundle rebuilt
    the training dataset (opening its images) and failed once the folder had moved
    ('image folder: ... is not a directory')."""
    images, run = trained
    photos = [str(p) for p in write_image_folder(tmp_path / "photos", per_class=2)]
    opened = recording_opens(monkeypatch)
    encode = Encoder.from_run(run, device="cpu")
    vectors = encode(photos)
    assert main(["bundle", str(run), "--out", str(tmp_path / "bundle")]) == 0
    assert not [path for path in opened if path.startswith(str(images))]

    moved = images.with_name("moved-away")
    images.rename(moved)
    try:
        again = Encoder.from_run(run, device="cpu")(photos)
        torch.testing.assert_close(again, vectors, rtol=0, atol=0)
        index_dir = tmp_path / "index"
        assert run_cli("index", run, tmp_path / "photos", "--out", index_dir, "--no-progress") == 0
        index = RetrievalIndex.load(index_dir)
        order = [photos.index(path) for path in index.paths]
        torch.testing.assert_close(index.vectors, vectors[order], rtol=0, atol=1e-6)
        assert run_cli("search", index_dir, photos[0], "-k", "2", "--json") == 0
        assert (
            run_cli(
                "report",
                run,
                "--images",
                tmp_path / "photos",
                "--out",
                tmp_path / "report.html",
                "--queries",
                "2",
                "-k",
                "2",
                "--no-progress",
            )
            == 0
        )
        exported = tmp_path / "embedder.pt"
        assert run_cli("export", run, "--format", "torchscript", "--out", exported) == 0
        assert main(["bundle", str(run), "--out", str(tmp_path / "bundle"), "--overwrite"]) == 0
    finally:
        moved.rename(images)
    sidecar = json.loads((tmp_path / "embedder.pt.json").read_text())
    assert sidecar["transform"] == EVAL_TRANSFORM and sidecar["decoding"] == DECODING
    info = json.loads((tmp_path / "bundle" / "bundle.json").read_text())
    assert info["data_hash"].startswith("unavailable (image folder:")


def test_bundle_of_a_trained_image_folder_run(trained, tmp_path, capsys):
    """Fails on the old code: 'gspdml bundle' refused every image-folder run ("give the config an
    explicit data.eval_transform", a key that gspdml train rejected)."""
    images, run = trained
    assert main(["bundle", str(run), "--out", str(tmp_path / "bundle")]) == 0
    assert f"wrote {tmp_path / 'bundle'}" in capsys.readouterr().out
    preprocessing = json.loads((tmp_path / "bundle" / "preprocessing.json").read_text())
    assert preprocessing == {**EVAL_TRANSFORM, "decoding": DECODING}
    photos = [str(p) for p in write_image_folder(tmp_path / "photos", per_class=2)]
    bundled = gspdml.from_pretrained(tmp_path / "bundle")(photos)
    expected = Encoder.from_run(run, device="cpu")(photos)
    torch.testing.assert_close(bundled, expected, rtol=0, atol=1e-6)
    data_hash = json.loads((tmp_path / "bundle" / "bundle.json").read_text())["data_hash"]
    assert data_hash.startswith("sha256:")  # the training images are there to be hashed
