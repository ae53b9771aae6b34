"""Data-parallel training over nccl, one GPU per rank (needs two GPUs): SyncBatchNorm, the
gathered global batch, GSP inside DDP and rank 0's shared evaluation run to the end of the run."""

import math

import pytest
import torch

from gspdml.config import load_config
from gspdml.training.checkpoint import load_state
from gspdml.training.run_dir import CHECKPOINT_FILE
from tests.helpers.cuda import CUDA
from tests.helpers.distributed import spawn_ranks

pytestmark = [
    *CUDA,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs CUDA with two GPUs for nccl"),
]


def test_two_gpus_train_one_run_over_nccl(make_config, tmp_path):
    config = load_config(
        make_config(
            model={"pooling": {"name": "gsp", "num_prototypes": 8, "iters": 30, "init": "random"}},
            schedule={"max_steps": 4},
            evaluation={"every": 2, "patience": None},
            trainer={"device": "cuda", "progress": False},
        )
    )
    spawn_ranks([(config, tmp_path / "run", False, None)], backend="nccl")
    state, _ = load_state(tmp_path / "run" / CHECKPOINT_FILE)
    assert state["trainer"]["step"] == 4 and math.isfinite(state["trainer"]["best_metric"])
