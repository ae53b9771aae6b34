"""Reading an offline W&B run file (``run-<id>.wandb``) with W&B's own record schema
(``wandb.proto.wandb_internal_pb2.Record``): the file is W&B's header (``:W&B``, a 2-byte magic,
a version byte) followed by a LevelDB-style log of 32 KiB blocks, each record a 7-byte header
(checksum, little-endian length, type: 1 full, 2 first, 3 middle, 4 last) and its bytes. The
Python reader W&B shipped (``wandb.sdk.internal.datastore``) is gone from its current releases,
which read the file in their Go core."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7


def _payloads(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B run file"
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the block's tail is padding
            pos += left
            continue
        length = int.from_bytes(data[pos + 4 : pos + 6], "little")
        kind = data[pos + 6]
        payload = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == 1:
            yield payload
        elif kind == 2:
            pending = payload
        elif kind == 3:
            pending += payload
        elif kind == 4:
            yield pending + payload


def read_offline_run(folder: Path) -> dict[str, Any]:
    """``{"history": [{key: value}], "config": {key: value}, "run": {"id", "name", "project"}}``
    of the one offline run under ``folder`` (``…/wandb/offline-run-*/``)."""
    from wandb.proto import wandb_internal_pb2

    (path,) = Path(folder).glob("wandb/offline-run-*/run-*.wandb")
    out: dict[str, Any] = {"history": [], "config": {}, "run": {}}
    for payload in _payloads(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "history":
            out["history"].append(
                {
                    (item.key or "/".join(item.nested_key)): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
        elif kind == "config":
            out["config"].update({u.key: json.loads(u.value_json) for u in record.config.update})
        elif kind == "run":
            out["run"] = {
                "id": record.run.run_id,
                "name": record.run.display_name,
                "project": record.run.project,
            }
            out["config"].update(
                {u.key: json.loads(u.value_json) for u in record.run.config.update}
            )
    return out
