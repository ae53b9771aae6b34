"""``--resume`` from a checkpoint that is not the run's own (copied from another run, or written by
another program) is refused with an error naming the file and what differs, before anything is
loaded. Before, another model's checkpoint failed with torch's bare ``RuntimeError`` (missing
keys in ``state_dict``) and one without the trainer's parts with a ``KeyError``; the same bare
``RuntimeError`` came from loading a weights file whose tensors are not those of the model its
metadata describes. The trainer's counters were converted, not checked: ``finished: "no"``
resumed as a finished run (``bool("no")``), ``step: 2.9`` as step 2, ``best_metric: "high"``
failed with a bare ``ValueError``."""

import shutil

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.training import Trainer, load_run
from gspdml.training.checkpoint import CheckpointError, load_state, save_state
from gspdml.training.run_dir import (
    BEST_WEIGHTS_FILE,
    CHECKPOINT_FILE,
    load_embedder,
    read_weights,
)
from tests.helpers.stopped_runs import stopped_run, training_images


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two runs stopped at step 3 (checkpointed at step 2): GAP and GeM (which has a parameter)."""
    tmp = tmp_path_factory.mktemp("two")
    images = training_images(tmp / "images")
    model = {"backbone": {"name": "small_cnn", "widths": [4, 8]}, "embedding_dim": 8}
    return {
        pooling: stopped_run(
            images, tmp / "runs" / pooling, name=pooling, model={**model, "pooling": pooling}
        )
        for pooling in ("gap", "gem")
    }


def _copy(two_runs, pooling, tmp_path):
    config, run_dir = two_runs[pooling]
    return config, shutil.copytree(run_dir, tmp_path / pooling)


def test_the_checkpoint_of_another_model_is_refused_naming_what_differs(two_runs, tmp_path):
    config, run = _copy(two_runs, "gem", tmp_path)
    shutil.copyfile(two_runs["gap"][1] / CHECKPOINT_FILE, run / CHECKPOINT_FILE)
    with pytest.raises(CheckpointError, match=r"last\.safetensors: its model .*missing pooling\.p"):
        Trainer.from_config(config, run, resume=True)


def test_a_checkpoint_without_the_trainers_parts_is_refused(two_runs, tmp_path):
    config, run = _copy(two_runs, "gap", tmp_path)
    state, meta = load_state(run / CHECKPOINT_FILE)
    save_state(run / CHECKPOINT_FILE, {"model": state["model"]}, meta)
    with pytest.raises(CheckpointError, match=r"no loss, optimizer, .*callbacks state"):
        Trainer.from_config(config, run, resume=True)


def test_the_runs_own_checkpoint_still_resumes(two_runs, tmp_path):
    config, run = _copy(two_runs, "gem", tmp_path)
    saved, _ = load_state(run / CHECKPOINT_FILE)
    trainer = Trainer.from_config(config, run, resume=True)
    assert trainer.step == 2
    for name, value in saved["model"].items():
        assert torch.equal(trainer.model.state_dict()[name], value), name


def test_weights_of_another_model_than_their_metadata_are_refused(two_runs, tmp_path):
    gap_state, _ = load_state(two_runs["gap"][1] / CHECKPOINT_FILE)
    _, gem_meta = read_weights(two_runs["gem"][1] / BEST_WEIGHTS_FILE)
    save_state(tmp_path / "model.safetensors", gap_state["model"], gem_meta)
    with pytest.raises(
        CheckpointError, match=r"model\.safetensors: its weights are not those .*pooling\.p"
    ):
        load_embedder(tmp_path / "model.safetensors")


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("finished", "no", r"'finished' is 'no', not true or false"),
        ("step", 2.9, r"'step' is '2\.9', not a whole number"),
        ("stopped_early", 0, r"'stopped_early' is '0', not true or false"),
        ("best_metric", "high", r"'best_metric' is 'high', not a number"),
        ("step", None, r"'step' is 'None', not a whole number"),
    ],
)
def test_a_trainer_counter_of_another_type_is_refused_not_converted(
    two_runs, tmp_path, key, value, named
):
    config, run = _copy(two_runs, "gap", tmp_path)
    state, meta = load_state(run / CHECKPOINT_FILE)
    state["trainer"][key] = value
    save_state(run / CHECKPOINT_FILE, state, meta)
    with pytest.raises(CheckpointError, match=r"last\.safetensors: trainer state " + named):
        Trainer.from_config(config, run, resume=True)


def test_a_missing_trainer_counter_is_refused(two_runs, tmp_path):
    config, run = _copy(two_runs, "gap", tmp_path)
    state, meta = load_state(run / CHECKPOINT_FILE)
    del state["trainer"]["step"]
    save_state(run / CHECKPOINT_FILE, state, meta)
    with pytest.raises(CheckpointError, match=r"last\.safetensors: no trainer state step"):
        Trainer.from_config(config, run, resume=True)


def test_best_weights_of_another_model_are_refused_before_resuming(two_runs, tmp_path):
    """``checkpoints/best.safetensors`` is restored at the end of training
    (``evaluation.restore_best``); another model's is refused when the run resumes, not after
    the training it would spoil (before: torch's bare ``RuntimeError`` at the very end)."""
    config, run = _copy(two_runs, "gem", tmp_path)
    shutil.copyfile(two_runs["gap"][1] / BEST_WEIGHTS_FILE, run / BEST_WEIGHTS_FILE)
    with pytest.raises(
        CheckpointError, match=r"best\.safetensors: its weights are not those of this run's model"
    ):
        Trainer.from_config(config, run, resume=True)


def test_a_finished_runs_best_weights_of_another_model_are_never_loaded(two_runs, tmp_path):
    """``load_run(RUN, weights="best")`` (``gspdml evaluate/index/bundle --weights best``)
    builds the model the weights file describes; one that is not the model of the run's
    config.yaml is refused. Before, a GAP model was returned under the GeM run's config."""
    _, run = _copy(two_runs, "gem", tmp_path)
    assert load_run(run, weights="best")[1].pooling.__class__.__name__ == "GeM"
    shutil.copyfile(two_runs["gap"][1] / BEST_WEIGHTS_FILE, run / BEST_WEIGHTS_FILE)
    with pytest.raises(ConfigError, match=r"best\.safetensors holds the weights of another model"):
        load_run(run, weights="best")
