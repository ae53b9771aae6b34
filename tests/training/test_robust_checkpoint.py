"""A full disk (or an over-size file) while checkpointing: the write fails with a
CheckpointWriteError (an OSError) naming the file, the previous checkpoint survives byte for byte, no temporary
file is left behind, and the run resumes from the surviving checkpoint.

Mechanisms that work as root (a read-only directory does not stop root): the kernel's
per-process file-size limit (``RLIMIT_FSIZE``: writes past it fail with EFBIG; Python ignores
SIGXFSZ), and ``safetensors.save_file`` replaced by a writer that fills part of the file and
then fails with ENOSPC, as a full disk does.
"""

import errno
import resource

import pytest

import gspdml.training.checkpoint as checkpoint_module
from gspdml.config import load_config
from gspdml.training import Trainer
from gspdml.training.callbacks import Callback
from gspdml.training.checkpoint import CheckpointWriteError, load_state
from tests.helpers.images import folder_config, image_folder


@pytest.fixture
def config(tmp_path):
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4, "c": 4}, test={"d": 2, "e": 2})
    return load_config(
        {
            **folder_config(root, tmp_path / "runs"),
            "schedule": {"max_steps": 4},
            "evaluation": {"every": 2, "split": "test", "patience": None, "recall_at": [1]},
        }
    )


class FaultAtStep(Callback):
    """Installs a fault just before the checkpoint of ``step`` is written (on_evaluation runs
    right before the trainer saves) and removes it afterwards."""

    def __init__(self, step, install, remove):
        self.step, self.install, self.remove = step, install, remove

    def on_evaluation(self, trainer, metrics):
        if trainer.step == self.step:
            self.install(trainer)

    def on_step_end(self, trainer):
        self.remove()


def _fit_with_fault(config, install, remove):
    fault = FaultAtStep(4, install, remove)
    trainer = Trainer.from_config(config, config["output_dir"] + "/run", callbacks={"fault": fault})
    try:
        with pytest.raises(
            CheckpointWriteError, match=f"cannot write {trainer.checkpoint_path}"
        ) as info:
            trainer.fit()
    finally:
        remove()
    return trainer, info


def _assert_previous_checkpoint_survives(trainer, before):
    path = trainer.checkpoint_path
    assert path.read_bytes() == before
    state, meta = load_state(path)
    assert meta["step"] == 2 and state["trainer"]["step"] == 2
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "best.safetensors",
        "last.safetensors",
    ]  # no temporary file


def test_file_size_limit_while_checkpointing(config):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    saved = {}

    def install(trainer):
        saved["bytes"] = trainer.checkpoint_path.read_bytes()
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(saved["bytes"]) // 2, hard))

    def remove():
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))

    trainer, info = _fit_with_fault(config, install, remove)
    assert "File too large" in str(info.value) or "27" in str(info.value)
    _assert_previous_checkpoint_survives(trainer, saved["bytes"])
    resumed = Trainer.from_config(config, trainer.run_dir, resume=True)
    assert resumed.step == 2
    assert resumed.fit()["steps"] == 4


def test_disk_full_while_checkpointing(config, monkeypatch):
    saved = {}
    real_save = checkpoint_module.save_file

    def full_disk(tensors, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(b"\0" * 1000)
        raise OSError(errno.ENOSPC, "No space left on device", filename)

    def install(trainer):
        saved["bytes"] = trainer.checkpoint_path.read_bytes()
        monkeypatch.setattr(checkpoint_module, "save_file", full_disk)

    def remove():
        monkeypatch.setattr(checkpoint_module, "save_file", real_save)

    trainer, info = _fit_with_fault(config, install, remove)
    assert "No space left on device" in str(info.value)
    _assert_previous_checkpoint_survives(trainer, saved["bytes"])
