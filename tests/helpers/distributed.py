"""Helpers for the data-parallel tests: a batch-norm-free backbone and spawned ranks that join
one process group as under ``torchrun``: through its environment variables, at a rendezvous
store that the launching process hosts."""

from __future__ import annotations

import contextlib
import os

import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from gspdml.models.backbones import BACKBONES, Backbone
from gspdml.training.callbacks import Callback


@BACKBONES.register("plain_cnn_for_ddp_tests")
class PlainCNN(Backbone):
    """Conv-ReLU-AvgPool blocks without batch norm (max-pooling breaks the exact ties of a constant
    background by rounding noise, which sends gradients to different pixels in the two runs): SyncBatchNorm has no CPU kernel, so on gloo
    the batch statistics of a rank's slice differ from those of the global batch; this backbone
    isolates what the data-parallel trainer itself must reproduce exactly."""

    def __init__(self, in_channels: int = 3, width: int = 8):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Conv2d(width, width, 3, padding=1),
            nn.ReLU(),
            nn.AvgPool2d(2),
        )
        self.out_channels = width

    def forward(self, images):
        return self.features(images)


def spawn_ranks(jobs: list, world_size: int = 2, backend: str = "gloo") -> None:
    """Run ``jobs`` (:func:`train_rank`) in ``world_size`` spawned processes, one rank each.

    As ``torchrun`` does, this process hosts the rendezvous store (a ``TCPStore`` on a port the
    system assigns when it binds) and holds the port until the ranks finish, and the ranks join
    it as clients (``TORCHELASTIC_USE_AGENT_STORE``). A port found free and released before the
    ranks bind it could be taken in between by a concurrent test (pytest-xdist workers, another
    run of the suite on the machine).

    The ranks are forked from a fork server (``multiprocessing``'s ``forkserver``, where the
    platform has one) that imported torch and the trainer once, when the first ranks of this test
    process started: a fresh interpreter per rank (``spawn``) spends seconds of CPU importing them
    again for every rank of every call. The server is a single-threaded process of its own, so
    its forks are as clean as spawned interpreters; it holds the environment of its start, which
    the ranks then overwrite with the variables :func:`torchrun_environment` sets."""
    store = dist.TCPStore("127.0.0.1", 0, world_size, is_master=True, wait_for_workers=False)
    mp.start_processes(
        train_rank,
        args=(world_size, store.port, jobs, backend),
        nprocs=world_size,
        join=True,
        start_method=_START_METHOD,
    )


#: how :func:`spawn_ranks` starts its ranks: forked from a server that preloaded these modules
_START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
if _START_METHOD == "forkserver":
    mp.set_forkserver_preload([__name__, "gspdml.training"])


def torchrun_environment(rank: int, world_size: int, port: int) -> None:
    """The variables ``torchrun`` gives rank ``rank``, its agent's store at ``port``."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TORCHELASTIC_USE_AGENT_STORE="True",
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        OMP_NUM_THREADS="1",
    )


class SimulatedCrash(Exception):
    pass


class CrashAfter(Callback):
    """Every rank stops with :class:`SimulatedCrash` after step ``step`` (a killed job)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer):
        if trainer.step == self.step:
            raise SimulatedCrash(f"simulated crash after step {self.step}")


def train_rank(rank: int, world_size: int, port: int, jobs: list, backend: str = "gloo") -> None:
    """``torch.multiprocessing.spawn`` target (:func:`spawn_ranks`): run every ``(config, run_dir,
    resume, crash_after)`` job as rank ``rank`` in one ``backend`` group (set up from the
    environment, as under ``torchrun``; nccl: one GPU per rank, ``cuda:rank``)."""
    import torch

    from gspdml.training import Trainer

    torch.set_num_threads(1)
    torchrun_environment(rank, world_size, port)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend)
    try:
        for config, run_dir, resume, crash_after in jobs:
            callbacks = {"crash": CrashAfter(crash_after)} if crash_after is not None else {}
            trainer = Trainer.from_config(config, run_dir, resume=resume, callbacks=callbacks)
            with contextlib.suppress(SimulatedCrash):
                trainer.fit()
    finally:
        dist.destroy_process_group()
