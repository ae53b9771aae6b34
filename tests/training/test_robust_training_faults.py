"""Faults during training: NaN embeddings, a one-sample class, files a config names that do
not exist. (A SIGKILL during training followed by ``--resume`` is covered by
tests/training/test_trainer_resume.py::test_sigkill_then_resume_gives_identical_weights_and_log.)
"""

import math

import pytest
import torch
import yaml

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.errors import ConfigError, DataError, TrainingError
from gspdml.training import Trainer, load_run, train
from gspdml.training.callbacks import Callback
from gspdml.training.checkpoint import load_state
from tests.helpers.images import folder_config, image_folder


@pytest.fixture
def root(tmp_path):
    return image_folder(tmp_path / "images", train={"a": 4, "b": 4, "c": 4}, test={"d": 2, "e": 2})


class DivergeAfter(Callback):
    """Numerical blow-up: after step ``step`` one weight of the 1x1 head becomes NaN."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer):
        if trainer.step == self.step:
            with torch.no_grad():
                projection = trainer.model.projection  # GAP: pool, then project
                layer = (
                    projection if isinstance(projection, torch.nn.Linear) else trainer.model.head
                )
                layer.weight.view(-1)[0] = math.nan


def test_nan_embeddings_stop_the_run_and_keep_the_last_good_checkpoint(root, tmp_path):
    config = load_config(
        {
            **folder_config(root, tmp_path / "runs"),
            "schedule": {"max_steps": 6},
            "evaluation": {"every": 2, "split": "test", "patience": None, "recall_at": [1]},
        }
    )
    trainer = Trainer.from_config(config, tmp_path / "run", callbacks={"diverge": DivergeAfter(3)})
    with pytest.raises(
        TrainingError,
        match=rf"non-finite embeddings \(loss nan\) at step 4; .*{trainer.checkpoint_path} is intact",
    ):
        trainer.fit()
    state, meta = load_state(trainer.checkpoint_path)
    assert meta["step"] == 2 and state["trainer"]["step"] == 2
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    assert not (tmp_path / "run" / "model.safetensors").exists()
    # the surviving checkpoint resumes (here without the fault) to the end
    assert Trainer.from_config(config, tmp_path / "run", resume=True).fit()["steps"] == 6


def test_one_sample_class_is_named_or_sampled_with_replacement(tmp_path):
    root = image_folder(
        tmp_path / "images", train={"alpha": 3, "lonely": 1, "gamma": 3}, test={"d": 2, "e": 2}
    )
    config = load_config(folder_config(root, tmp_path / "runs"))
    with pytest.raises(
        ConfigError, match=r"data.samples_per_class: class 2 \(lonely\) has 1 samples"
    ):
        train(config)
    config = load_config(
        folder_config(root, tmp_path / "runs"), ["data.replacement=true", "name=replacement"]
    )
    assert train(config)["steps"] == 2


def test_missing_files_named_in_the_config(tmp_path, root, capsys):
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError, match=f"config file not found: {missing / 'run.yaml'}"):
        load_config(missing / "run.yaml")
    child = tmp_path / "child.yaml"
    child.write_text(yaml.safe_dump({"base": "../nowhere/base.yaml"}))
    with pytest.raises(ConfigError, match="config file not found: .*nowhere/base.yaml"):
        load_config(child)
    config = load_config(folder_config(missing / "images", tmp_path / "runs"))
    with pytest.raises(DataError, match=f"{missing / 'images'} is not a directory"):
        train(config)
    config = load_config(
        folder_config(root, tmp_path / "runs"),
        ["data.dataset={name: csv, path: %s}" % (missing / "list.csv")],
    )
    with pytest.raises(DataError, match=f"{missing / 'list.csv'}: CSV file not found"):
        train(config)
    with pytest.raises(ConfigError, match="not a gspdml run directory"):
        load_run(missing)
    # the command line prints the same message and exits with an error status
    assert main(["train", str(missing / "run.yaml")]) != 0
    assert str(missing / "run.yaml") in capsys.readouterr().err
