"""``metrics.jsonl``: one JSON object per line, optionally mirrored into TensorBoard (every
number becomes the scalar ``<split>/<key>`` at its step).

A record is appended whole or not at all (a failed write is cut back). A torn last line is left
out when reading, with a warning; a damaged line before it is a
:class:`~gspdml.errors.DataError`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from gspdml.errors import ConfigError, DataError
from gspdml.output_files import OutputError, atomic_write_text, json_text
from gspdml.training.run_dir import TENSORBOARD_DIR

if TYPE_CHECKING:  # imported when tensorboard is wanted (an optional package)
    from torch.utils.tensorboard import SummaryWriter


def tensorboard_wanted(setting: Any) -> bool:
    """``trainer.tensorboard``: ``auto`` is on when the ``tensorboard`` package is installed;
    ``true`` without it is an error naming the package."""
    installed = importlib.util.find_spec("tensorboard") is not None
    if setting is True and not installed:
        raise ConfigError(
            "trainer.tensorboard",
            "true needs the tensorboard package (pip install 'gspdml[tensorboard]'), "
            "or set it to auto or false",
        )
    return bool(installed and setting in ("auto", True))


class MetricsLog:
    """``RUN_DIR/metrics.jsonl``, mirrored into TensorBoard when it is open (``trainer.log``)."""

    def __init__(self, path: Path):
        self.path = path
        self._writer: Optional[SummaryWriter] = None
        self.sinks: list[Any] = []  # experiment trackers (gspdml.training.trackers): log, close

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record``: ``step`` (an integer >= 0), a ``split`` (default ``train``) and
        numbers (inf and nan as null). Main process only (``trainer.is_main``)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _append_whole(self.path, (json_text(record) + "\n").encode("utf-8"))
        if self._writer is not None:
            step, values = scalars(record)
            for key, value in values.items():
                self._writer.add_scalar(key, value, step)
            self._writer.flush()
        for sink in self.sinks:
            sink.log(record)

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
        records = []
        for position, (number, line) in enumerate(numbered):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                if position < len(numbered) - 1:
                    raise DataError(f"{self.path}:{number}: not a JSON object: {err}") from None
                warnings.warn(
                    f"{self.path}: the last line ({number}) is torn (a write that did not finish); "
                    "it is left out",
                    RuntimeWarning,
                    stacklevel=2,
                )
                break
            if not isinstance(record, dict):
                raise DataError(
                    f"{self.path}:{number}: expected a JSON object, got {type(record).__name__}"
                )
            step = record.get("step")
            if isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise DataError(
                    f"{self.path}:{number}: every record has a step (an integer >= 0), got "
                    f"{step!r}; the file was not written by gspdml or was edited"
                )
            records.append(record)
        return records

    def truncate_after(self, step: int) -> None:
        """Drop records newer than ``step`` (those a killed run wrote after its last checkpoint)
        and the final test record (a resumed run writes it again when it finishes)."""
        kept = [r for r in self.read() if r.get("step", 0) <= step and not r.get("final")]
        atomic_write_text(self.path, "".join(json_text(r) + "\n" for r in kept))

    def open_tensorboard(self, step: int) -> Path:
        """Mirror the records written from now on into ``RUN_DIR/tensorboard``, purging events
        after ``step`` (the last checkpoint)."""
        from torch.utils.tensorboard import SummaryWriter

        folder = self.path.parent / TENSORBOARD_DIR
        self._writer = SummaryWriter(str(folder), purge_step=step + 1 if step >= 0 else None)
        return folder

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
        self.sinks = []
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def scalars(record: Mapping[str, Any]) -> tuple[int, dict[str, float]]:
    """The record's step and its numbers as ``SPLIT/KEY`` (TensorBoard's and the trackers')."""
    split = "test_final" if record.get("final") else record.get("split", "train")
    values = {
        f"{split}/{key}": float(value)
        for key, value in record.items()
        if key not in ("step", "split", "final", "weights_step")
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    }
    return int(record.get("step", 0)), values


def _append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (never through a symbolic link); a failure cuts the file back
    to where it ended and raises :class:`OutputError` naming it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if os.path.islink(path):  # a received run folder: never write through a link out of it
            raise OutputError(
                f"cannot append to {path}: it is a symbolic link; remove it (a run writes its "
                "own metrics.jsonl)"
            ) from None
        raise OutputError(f"cannot append to {path}: {exc.strerror or exc}") from exc
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            os.ftruncate(fd, end)
            raise OutputError(
                f"cannot append to {path}: {exc.strerror or exc}; its records up to this one "
                "are intact (free some space, then resume the run)"
            ) from exc
    finally:
        os.close(fd)
