"""The quickest documented command on small folders: ``gspdml train own-images
data.dataset.root=DIR`` trains on a 10-class folder (it failed: "8 classes per batch but the
dataset has only 3 classes"), and a 2-class folder gets an error about the option in force and
the fix, not about ``data.dataset.val_classes``, which the user never set."""

from gspdml.cli import main
from tests.helpers.retrieval import write_image_folder

QUICK = ["schedule.max_steps=4", "evaluation.every=2", "--no-progress"]


def test_a_ten_class_folder_trains_with_the_preset(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_image_folder(tmp_path / "images", classes=tuple(f"c{i}" for i in range(10)), per_class=5)
    assert main(["train", "own-images", "data.dataset.root=images", *QUICK]) == 0
    err = capsys.readouterr().err
    assert "train: 3 classes" in err  # 5 test classes, 2 of the 5 others validate
    assert "batches of 3 classes x 4 images (data.classes_per_batch: auto)" in err


def test_a_two_class_folder_names_the_split_and_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_image_folder(tmp_path / "images", classes=("red", "blue"), per_class=5)
    assert main(["train", "own-images", "data.dataset.root=images", *QUICK]) == 2
    err = capsys.readouterr().err
    assert "data.dataset.val_fraction: the training classes (1 after the test split)" in err
    assert "data.dataset.test_fraction" in err and "val_classes" not in err
    assert not (tmp_path / "runs" / "own-images").exists()


def test_too_many_classes_per_batch_names_the_split_and_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_image_folder(tmp_path / "images", classes=tuple(f"c{i}" for i in range(10)), per_class=5)
    argv = ["train", "own-images", "data.dataset.root=images", "data.classes_per_batch=8", *QUICK]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "8 classes per batch but the training split has only 3 classes" in err
    assert "data.classes_per_batch to at most 3 (or auto)" in err
