"""``metrics.jsonl``: one JSON object per line, appended as training goes; optionally mirrored
into TensorBoard event files in the run directory (``tensorboard --logdir RUN_DIR``), written
from the same records: every number of a record becomes the scalar ``<split>/<key>`` at its step."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional

from gspdml.errors import ConfigError
from gspdml.training.checkpoint import atomic_write_text
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
    def __init__(self, path: Path):
        self.path = path
        self._writer: Optional[SummaryWriter] = None

    def write(self, record: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as handle:
            handle.write(json.dumps(_finite(record)) + "\n")
        if self._writer is not None:
            self._write_scalars(record)

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def truncate_after(self, step: int) -> None:
        """Drop records newer than ``step`` (those a killed run wrote after its last checkpoint)
        and the final test record (a resumed run writes it again when it finishes)."""
        kept = [r for r in self.read() if r.get("step", 0) <= step and not r.get("final")]
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def open_tensorboard(self, step: int) -> Path:
        """Mirror the records written from now on into ``RUN_DIR/tensorboard``; events of a killed
        run after ``step`` (its last checkpoint) are purged, as :meth:`truncate_after` does here."""
        from torch.utils.tensorboard import SummaryWriter

        folder = self.path.parent / TENSORBOARD_DIR
        self._writer = SummaryWriter(str(folder), purge_step=step + 1 if step >= 0 else None)
        return folder

    def _write_scalars(self, record: Mapping[str, Any]) -> None:
        writer = self._writer
        if writer is None:
            return
        step, split = (
            int(record.get("step", 0)),
            "test_final" if record.get("final") else record.get("split", "train"),
        )
        for key, value in record.items():
            if (
                key not in ("step", "split", "final", "weights_step")
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
            ):
                writer.add_scalar(f"{split}/{key}", float(value), step)
        writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _finite(record: Mapping[str, Any]) -> dict[str, Any]:
    """JSON has no inf/nan: write them as null."""
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()
    }
