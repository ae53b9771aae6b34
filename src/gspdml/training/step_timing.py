"""How long the training steps take and how much of it they wait for data, per log interval.

:class:`StepTimer` times the loader's ``__next__`` (the data wait). The trainer reads it right
after reading the loss from the device, so the interval's wall time covers the device's work.
``data_wait`` is the interval's share of wall time spent waiting for data.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

Item = TypeVar("Item")


class StepTimer:
    """Data wait and wall time of the steps since the last :meth:`read` (or :meth:`restart`)."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        """Start a new interval now (after a validation round, which is not a training step)."""
        self.start, self.waited, self.steps = time.perf_counter(), 0.0, 0

    def batches(self, loader: Iterable[Item]) -> Iterator[Item]:
        """The loader's batches, timing how long each one is waited for."""
        iterator = iter(loader)
        while True:
            before = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            self.waited += time.perf_counter() - before
            self.steps += 1
            yield batch

    def read(self) -> dict[str, float]:
        """``{data_wait, data_wait_seconds, seconds_per_step}`` of the interval, then a new one."""
        wall = time.perf_counter() - self.start
        steps = max(self.steps, 1)
        record = {
            "data_wait": self.waited / wall if wall > 0 else 0.0,
            "data_wait_seconds": self.waited / steps,
            "seconds_per_step": wall / steps,
        }
        self.restart()
        return record


def progress_bar(name: str, total: int, done: int, enabled: bool) -> tqdm:
    """The bar of a run's ``total`` steps, ``done`` of them done, on stderr (``trainer.progress``;
    none without a stderr)."""
    disable = not enabled or sys.stderr is None
    return tqdm(
        total=total, initial=done, desc=name, dynamic_ncols=True, disable=disable, file=sys.stderr
    )
