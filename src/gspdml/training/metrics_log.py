"""``metrics.jsonl``: one JSON object per line, appended as training goes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from gspdml.training.checkpoint import atomic_write_text


class MetricsLog:
    def __init__(self, path: Path):
        self.path = path

    def write(self, record: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as handle:
            handle.write(json.dumps(_finite(record)) + "\n")

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def truncate_after(self, step: int) -> None:
        """Drop records newer than ``step`` (those a killed run wrote after its last checkpoint)
        and the final test record (a resumed run writes it again when it finishes)."""
        kept = [r for r in self.read() if r.get("step", 0) <= step and not r.get("final")]
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))


def _finite(record: Mapping[str, Any]) -> dict[str, Any]:
    """JSON has no inf/nan: write them as null."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
