"""Training on a user's data never ships a worse model silently: validation that cannot rank,
uninitialised GSP, a changed config on resume, pair losses without pairs; and what a run tells
and keeps (Ctrl-C checkpoint, periodic checkpoints, TensorBoard read back by its own reader)."""

import json
import os
import signal

import pytest
import torch
import yaml
from safetensors.torch import load_file

from gspdml.cli import main
from gspdml.config import dump_config, load_config
from gspdml.errors import ConfigError
from gspdml.models import build_embedder
from gspdml.training import Trainer, load_run, train
from gspdml.training.config_changes import check_resume_config, config_differences
from gspdml.training.run_dir import save_weights

GSP = {"name": "gsp", "num_prototypes": 8, "memory_size": 512, "iters": 10}


def test_a_validation_split_that_cannot_rank_is_refused_for_selection(make_config, tmp_path):
    one_class = {
        "dataset": {"name": "collage_digits", "images_per_class": 8, "class_split": [12, 1, 6]}
    }
    with pytest.raises(
        ConfigError, match="evaluation.split: the val split cannot select a model: 1 classes"
    ):
        Trainer.from_config(load_config(make_config(data=one_class)), tmp_path / "run")


def test_without_selection_the_last_step_is_kept_and_said(make_config, capsys, tmp_path):
    one_class = {
        "dataset": {"name": "collage_digits", "images_per_class": 8, "class_split": [12, 1, 6]}
    }
    config = load_config(
        make_config(
            data=one_class,
            schedule={"max_steps": 10},
            evaluation={"every": 5, "patience": None, "restore_best": False},
        )
    )
    results = train(config, tmp_path / "run")
    assert "training without model selection" in capsys.readouterr().err
    assert results["best_step"] == 10  # the last round, not the first of equal scores
    records = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert all("best" not in r for r in records if r["split"] == "val")


def test_pair_losses_need_two_samples_per_class(make_config, tmp_path):
    with pytest.raises(ConfigError, match="data.samples_per_class: the loss needs at least 2"):
        Trainer.from_config(load_config(make_config(data={"samples_per_class": 1})), tmp_path / "a")
    # a proxy loss trains on one sample per class
    proxy = load_config(make_config(data={"samples_per_class": 1}, loss={"name": "proxy_anchor"}))
    Trainer.from_config(proxy, tmp_path / "b")


def test_gsp_is_initialised_before_the_first_evaluation_and_saved_initialised(
    make_config, tmp_path, capsys
):
    # 5 steps of 16 samples fill 80 of the 512 memory slots by the first evaluation
    config = load_config(make_config(model={"pooling": GSP}, schedule={"max_steps": 10}))
    train(config, tmp_path / "run")
    assert "pooling: initialised at step 5 from 80 samples" in capsys.readouterr().err
    _, model = load_run(tmp_path / "run", weights="best")
    assert model.pooling.is_initialised and int(model.pooling.memory_filled) == 80
    with pytest.raises(ConfigError, match="evaluation.every: pooling needs 8 training samples"):
        Trainer.from_config(
            load_config(
                make_config(
                    model={"pooling": GSP},
                    data={"classes_per_batch": 2, "samples_per_class": 2},
                    evaluation={"every": 1, "patience": None},
                )
            ),
            tmp_path / "x",
        )


def test_load_run_refuses_an_uninitialised_gsp(make_config, tmp_path):
    config = load_config(make_config(model={"pooling": GSP}))
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.yaml").write_text(dump_config(config))
    save_weights(
        tmp_path / "old" / "model.safetensors", build_embedder(config["model"], 3), 3, config
    )
    with pytest.raises(ConfigError, match="pooling was saved before it was initialised"):
        load_run(tmp_path / "old")


def test_config_differences_name_every_key(make_config):
    saved = load_config(make_config())
    new = load_config(
        make_config(
            data={
                "dataset": {
                    "name": "collage_digits",
                    "images_per_class": 9,
                    "class_split": [12, 6, 6],
                }
            },
            trainer={"progress": True},
        )
    )
    assert set(config_differences(saved, new)) == {
        "data.dataset.images_per_class",
        "trainer.progress",
    }
    with pytest.raises(ConfigError, match="data.dataset.images_per_class: 8 -> 9"):
        check_resume_config(saved, new, allow_changes=True)
    harmless = load_config(make_config(trainer={"progress": True}))
    with pytest.raises(ConfigError, match="--allow-changes"):
        check_resume_config(saved, harmless, allow_changes=False)
    assert check_resume_config(saved, harmless, allow_changes=True) == {
        "trainer.progress": (False, True)
    }


def test_a_key_the_saved_run_predates_is_no_difference_at_its_default(make_config):
    """A run written before ``evaluation.select_postprocessed`` existed is the same run as one
    asking for that option's default; asking for another value is a difference, and so is a key
    the new config lacks."""
    new = load_config(make_config())
    saved = new.to_dict()
    del saved["evaluation"]["select_postprocessed"]
    assert config_differences(saved, new) == {}
    other = new.to_dict()
    other["evaluation"]["select_postprocessed"] = True
    assert config_differences(saved, other) == {
        "evaluation.select_postprocessed": ("<absent>", True)
    }
    assert config_differences(new, saved) == {
        "evaluation.select_postprocessed": (False, "<absent>")
    }


def _write(config, path):
    path.write_text(dump_config(config))
    return str(path)


def test_ctrl_c_writes_a_checkpoint_prints_the_resume_command_and_resumes_exactly(
    make_config, tmp_path, monkeypatch, capsys
):
    config = load_config(
        make_config(schedule={"max_steps": 12}, evaluation={"every": 6, "patience": None})
    )
    path = _write(config, tmp_path / "run.yaml")
    assert main(["train", path, "--run-dir", str(tmp_path / "straight")]) == 0

    real_step = Trainer._train_step

    def step_then_ctrl_c(self, images, labels):
        loss = real_step(self, images, labels)
        if self.step == 8:
            os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT, handled at the step boundary
        return loss

    monkeypatch.setattr(Trainer, "_train_step", step_then_ctrl_c)
    capsys.readouterr()
    assert main(["train", path, "--run-dir", str(tmp_path / "stopped")]) == 130
    err = capsys.readouterr().err
    assert (
        "interrupted at step 8" in err
        and f"gspdml train {path} --resume --run-dir {tmp_path / 'stopped'}" in err
    )
    assert not (tmp_path / "stopped" / "model.safetensors").exists()
    monkeypatch.setattr(Trainer, "_train_step", real_step)
    assert main(["train", path, "--resume", "--run-dir", str(tmp_path / "stopped")]) == 0
    a, b = (
        load_file(str(tmp_path / "straight" / "model.safetensors")),
        load_file(str(tmp_path / "stopped" / "model.safetensors")),
    )
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "straight" / "metrics.jsonl").read_text() == (
        tmp_path / "stopped" / "metrics.jsonl"
    ).read_text()


def test_checkpoints_every_n_steps_besides_evaluations(make_config, tmp_path, monkeypatch):
    saved_at = []
    real_save = Trainer._save_checkpoint

    def recording(self):
        saved_at.append(self.step)
        real_save(self)

    monkeypatch.setattr(Trainer, "_save_checkpoint", recording)
    config = load_config(
        make_config(
            schedule={"max_steps": 7},
            evaluation={"every": 5, "patience": None},
            trainer={"checkpoint_every": 3},
        )
    )
    train(config, tmp_path / "run")
    assert saved_at == [3, 5, 6, 7]


def test_tensorboard_events_hold_the_records_of_metrics_jsonl(make_config, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = load_config(make_config(schedule={"max_steps": 10}, trainer={"tensorboard": True}))
    train(config, tmp_path / "run")
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    records = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    for split, key in (("train", "loss"), ("val", "map_at_r"), ("val", "recall_at_1")):
        expected = [
            (r["step"], r[key]) for r in records if r["split"] == split and not r.get("final")
        ]
        logged = [(e.step, e.value) for e in events.Scalars(f"{split}/{key}")]
        assert [s for s, _ in logged] == [s for s, _ in expected] and len(expected) >= 2
        assert [v for _, v in logged] == pytest.approx([v for _, v in expected], rel=1e-6)
    final = [r for r in records if r.get("final")][0]
    assert events.Scalars("test_final/map_at_r")[0].value == pytest.approx(
        final["map_at_r"], rel=1e-6
    )


def test_resume_of_a_run_saved_before_defaults_were_written_out(make_config, tmp_path, capsys):
    config = load_config(make_config(schedule={"max_steps": 5}))
    train(config, tmp_path / "run")
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    del (
        saved["trainer"]["checkpoint_every"],
        saved["data"]["dataset"]["num_folds"],
    )  # as an older version wrote it
    (tmp_path / "run" / "config.yaml").write_text(dump_config(saved))
    train(config, tmp_path / "run", resume=True)
    assert "changed on resume" not in capsys.readouterr().err
