"""Hostile ``.pth`` files written byte by byte, as an attacker would: a torch zip checkpoint
whose pickle declares what the test chooses (a storage's element count, a tensor's size and
strides) and whose records are stored or deflated (a zip bomb). Nothing here runs torch.save:
the pickle is written with :mod:`pickle` and the archive with :mod:`zipfile`, in the layout
``torch.save`` uses (``archive/data.pkl``, ``archive/data/<key>``, ``archive/byteorder``,
``archive/version``)."""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class Storage:
    """A storage record: its key, the element count the pickle declares, and its bytes (or
    ``inflated`` zero bytes, deflated: a zip bomb)."""

    key: str
    numel: int
    data: bytes = b""
    inflated: int = 0


@dataclass(frozen=True)
class Tensor:
    """A float32 tensor view on ``storage`` with the given size and strides."""

    storage: Storage
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0

    def __reduce__(self):
        return (
            torch._utils._rebuild_tensor_v2,
            (self.storage, self.offset, self.size, self.stride, False, collections.OrderedDict()),
        )


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel)
        return None


def _deflated_zeros(count: int) -> bytes:
    """``count`` zero bytes, raw-deflated (fast: one compressed block repeated after full
    flushes, each of which resets the compressor's window)."""
    block = 1 << 24
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = compressor.compress(bytes(block)) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = zlib.compressobj(9, zlib.DEFLATED, -15)
    assert again.compress(bytes(block)) + again.flush(zlib.Z_FULL_FLUSH) == piece
    whole, rest = divmod(count, block)
    tail = zlib.compressobj(9, zlib.DEFLATED, -15)
    end = tail.compress(bytes(rest)) + tail.flush(zlib.Z_FINISH)
    return piece * whole + end


def write_checkpoint(path: Path, state: dict) -> Path:
    """Write ``state`` (names -> :class:`Tensor`, or anything picklable) as a torch zip file."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=2).dump(state)
    storages = {}
    for value in state.values():
        if isinstance(value, Tensor):
            storages[value.storage.key] = value.storage
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", "little")
        for storage in storages.values():
            name = f"archive/data/{storage.key}"
            if storage.inflated:
                _write_deflated(archive, name, storage.inflated)
            else:
                archive.writestr(name, storage.data)
        archive.writestr("archive/version", "3\n")
    return path


def _write_deflated(archive: zipfile.ZipFile, name: str, count: int) -> None:
    """A record of ``count`` zero bytes whose deflated stream is written as is."""
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    stream = _deflated_zeros(count)
    info.file_size, info.compress_size = count, len(stream)
    info.CRC = _zeros_crc(count)
    archive.fp.write(info.FileHeader(zip64=count > 0x7FFFFFFF))
    archive.fp.write(stream)
    archive.start_dir = archive.fp.tell()
    archive.filelist.append(info)
    archive.NameToInfo[name] = info
    info.header_offset = (
        archive.start_dir - len(stream) - len(info.FileHeader(zip64=count > 0x7FFFFFFF))
    )


def _zeros_crc(count: int) -> int:
    crc, block = 0, bytes(1 << 24)
    whole, rest = divmod(count, len(block))
    for _ in range(whole):
        crc = zlib.crc32(block, crc)
    return zlib.crc32(bytes(rest), crc)
