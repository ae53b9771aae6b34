"""How training stops before its end: a non-finite step, recorded on the device without waiting
for it (:class:`FaultRecord`), and Ctrl-C at a step boundary (:func:`interruptible`,
:class:`TrainingInterrupted`)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Optional

import torch
from torch import nn

from gspdml.errors import GspdmlError, TrainingError
from gspdml.models.output import EmbedderOutput


class FaultRecord:
    """The first training step with a non-finite loss or embedding (a loss may mask rows out),
    recorded on the device without waiting (:meth:`note`), read at the trainer's checks."""

    def __init__(self, device: torch.device):
        self.step = torch.zeros((), dtype=torch.int64, device=device)  # 0: none yet
        self.embeddings = torch.zeros((), dtype=torch.bool, device=device)
        self.loss = torch.zeros((), device=device)
        #: whether every training embedding since :meth:`start_step` was finite (:meth:`watch`)
        self.finite_embeddings = torch.ones((), dtype=torch.bool, device=device)

    def watch(self, model: nn.Module) -> None:
        """A forward hook on ``model`` that clears :attr:`finite_embeddings` when a training
        forward gives a non-finite embedding (no device sync)."""

        def hook(module: nn.Module, inputs: object, output: EmbedderOutput) -> None:
            if module.training:
                self.finite_embeddings &= torch.isfinite(output.embedding).all()

        model.register_forward_hook(hook)

    def start_step(self) -> None:
        self.finite_embeddings.fill_(True)

    def note(self, step: int, loss: torch.Tensor, finite_embeddings: torch.Tensor) -> None:
        first = (self.step == 0) & ~(torch.isfinite(loss) & finite_embeddings)
        self.step.masked_fill_(first, step)
        self.embeddings.copy_(torch.where(first, ~finite_embeddings, self.embeddings))
        self.loss.copy_(torch.where(first, loss.float(), self.loss))

    def read(self) -> Optional[str]:
        """What went wrong first, or None."""
        step = int(self.step)
        if step == 0:
            return None
        loss = float(self.loss)
        if bool(self.embeddings):
            return f"non-finite embeddings (loss {loss}) at step {step}"
        return f"non-finite loss ({loss}) at step {step}"

    def check(self, checkpoint: Path) -> None:
        """Stop when a step since the last check had a NaN/inf loss or embedding, naming the
        first (checked before every evaluation and checkpoint, so none holds a failed step)."""
        fault = self.read()
        if fault is not None:
            raise TrainingError(
                f"{fault}; training stopped, the last good checkpoint {checkpoint} is intact"
            )


class TrainingInterrupted(GspdmlError):
    """Ctrl-C: training stopped at a step boundary after writing its checkpoint."""

    def __init__(self, step: int, checkpoint: Path):
        self.step, self.checkpoint = step, checkpoint
        super().__init__(f"interrupted at step {step}; checkpoint written to {checkpoint}")


@contextlib.contextmanager
def interruptible(request_stop: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C (SIGINT) calls ``request_stop`` (the trainer ends the step, writes a checkpoint and
    raises :class:`TrainingInterrupted`); a second Ctrl-C stops at once. Main thread only."""

    def on_sigint(signum: int, frame: Optional[FrameType]) -> None:
        request_stop()
        signal.signal(signal.SIGINT, previous)  # a second Ctrl-C interrupts at once

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
