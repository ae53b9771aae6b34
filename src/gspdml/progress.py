"""Progress lines for the long phases of a run (pre-training, a feature cache's first pass,
embedding a folder): plain lines on stderr, at most one per :data:`INTERVAL_ENV` seconds::

    gspdml: embedding 3014 images: 512/3014 images (17%), 21.4 images/s, 24 s elapsed, ~2 min left

A phase shorter than the interval prints nothing. Lines go through ``tqdm.write`` (no torn bar)
to stderr, or nowhere when it is closed; never to stdout, which may carry JSON.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Optional

from tqdm import tqdm

from gspdml.errors import ConfigError

#: environment variable: seconds between two progress lines (0: every update)
INTERVAL_ENV = "GSPDML_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 5.0


def progress_interval() -> float:
    """The interval of :data:`INTERVAL_ENV`, or :data:`DEFAULT_INTERVAL` when it is not set."""
    text = os.environ.get(INTERVAL_ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(INTERVAL_ENV, f"seconds between progress lines, >= 0; got {text!r}")
    return value


def duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``2.5 h``: a duration as a person reads it."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """Rate-limited progress lines of one phase (module docstring).

    Args:
        what: the phase, e.g. ``"embedding 3014 images"``.
        total: the count at the end, or None when unknown (no percentage, no time left).
        unit: what is counted (``"images"``, ``"steps"``, ``"maps"``).
        enabled: False prints nothing (``--no-progress``).
        interval: seconds between lines; None reads :func:`progress_interval`.
        clock: the time source (seconds), for tests.

    The rate is that of the period since the previous line (since the start for the first),
    and the time left is the rest of ``total`` at that rate.
    """

    def __init__(
        self,
        what: str,
        total: Optional[int] = None,
        unit: str = "items",
        *,
        enabled: bool = True,
        interval: Optional[float] = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.what, self.total, self.unit, self.enabled = what, total, unit, enabled
        self.interval = progress_interval() if interval is None else interval
        self.clock = clock
        self.done = 0
        self.start = self._last_time = clock()
        self._last_done = 0
        self.lines = 0  # lines printed so far

    def update(self, count: int = 1, note: str = "") -> None:
        """``count`` more done; a line when the interval has passed and something was done.
        ``note``: a few words appended to the line (e.g. the current loss)."""
        self.done += count
        if not self.enabled:
            return
        now = self.clock()
        if now - self._last_time >= self.interval and self.done > self._last_done:
            self._write(now, note)

    def close(self, note: str = "") -> None:
        """The last line (``done in ...``), when the phase printed any line before."""
        if self.enabled and self.lines:
            now = self.clock()
            self._say(f"{self._count()}, done in {duration(now - self.start)}", note)
            self.lines = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: Optional[type[BaseException]],
        error: Optional[BaseException],
        trace: Optional[TracebackType],
    ) -> None:
        if kind is None:
            self.close()

    def _count(self) -> str:
        if not self.total:
            return f"{self.done} {self.unit}"
        return f"{self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.0f}%)"

    def _write(self, now: float, note: str) -> None:
        period = now - self._last_time
        rate = (self.done - self._last_done) / period if period > 0 else 0.0
        parts = [self._count()]
        if rate > 0:
            parts.append(f"{rate:.3g} {self.unit}/s")
        parts.append(f"{duration(now - self.start)} elapsed")
        if self.total and rate > 0 and self.done < self.total:
            parts.append(f"~{duration((self.total - self.done) / rate)} left")
        self._say(", ".join(parts), note)
        self._last_time, self._last_done = now, self.done

    def _say(self, text: str, note: str) -> None:
        say(f"gspdml: {self.what}: {text}" + (f", {note}" if note else ""))
        self.lines += 1


def say(line: str) -> None:
    """Write ``line`` to stderr without tearing a progress bar, or nowhere when stderr is closed
    (``tqdm.write`` given ``file=None`` writes to stdout)."""
    if sys.stderr is not None:
        tqdm.write(line, file=sys.stderr)
