"""A run that fails before its first checkpoint leaves no folder behind (it had nothing to
resume); a folder that existed before, or one with a checkpoint, is kept."""

import pytest

from gspdml.errors import TrainingError
from gspdml.training import train
from gspdml.training.trainer import Trainer


def _fail_at_once(self):
    raise TrainingError("non-finite loss at step 1 (injected)")


def test_a_run_that_fails_before_any_checkpoint_removes_the_folder_it_created(
    make_config, tmp_path, monkeypatch
):
    monkeypatch.setattr(Trainer, "fit", _fail_at_once)
    run_dir = tmp_path / "runs" / "tiny"
    with pytest.raises(TrainingError):
        train(make_config(), run_dir)
    assert not run_dir.exists()
    kept = tmp_path / "mine"
    (kept / "notes").mkdir(parents=True)  # the user's own folder
    with pytest.raises(TrainingError):
        train(make_config(), kept)
    assert (kept / "notes").is_dir() and (kept / "config.yaml").is_file()


def test_a_run_with_a_checkpoint_is_kept_for_resume(make_config, tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "tiny"
    train(make_config(schedule={"max_steps": 5}), run_dir)

    monkeypatch.setattr(Trainer, "fit", _fail_at_once)
    with pytest.raises(TrainingError):
        train(make_config(schedule={"max_steps": 5}), run_dir, resume=True)
    assert (run_dir / "checkpoints" / "last.safetensors").is_file()
