"""A run stopped by an error after step 3 of its 4 (its checkpoint of step 2 on disk) on a folder
of tiny images: what the tests of resuming, of a run folder's files under faults and of copies of
a run folder start from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gspdml.config import load_config
from gspdml.training import Trainer
from gspdml.training.callbacks import Callback
from tests.helpers.images import folder_config, image_folder

#: ``evaluation`` of a run whose test split is evaluated at step 2, the checkpoint's step
EVALUATE_AT_STEP_2 = {"every": 2, "split": "test", "patience": None, "recall_at": [1]}


class StopAt(Callback):
    """Stops the run with an error after ``step``."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, trainer: Any) -> None:
        if trainer.step == self.step:
            raise RuntimeError("stopped by the test")


def training_images(folder: Path) -> Path:
    """``folder``: an image folder of 3 training classes of 4 images and 2 test classes of 2."""
    return image_folder(folder, train={"a": 4, "b": 4, "c": 4}, test={"d": 2, "e": 2})


def stopped_run(images: Path, run_dir: Path, **sections: Any) -> tuple[Any, Path]:
    """``(config, run_dir)`` of a run of 4 steps on ``images`` (:func:`folder_config`, its
    top-level ``sections`` replaced) stopped after step 3, checkpointed at step 2."""
    config = load_config(
        {**folder_config(images, run_dir.parent), "schedule": {"max_steps": 4}, **sections}
    )
    trainer = Trainer.from_config(config, run_dir, callbacks={"stop": StopAt(3)})
    with pytest.raises(RuntimeError, match="stopped by the test"):
        trainer.fit()
    return config, trainer.run_dir
