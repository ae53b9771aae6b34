"""A torch checkpoint (``.pth``) whose weight record was damaged after writing (one bit flipped,
as a bad copy or download leaves it) is refused naming the file and the record. Before, the zip
records' CRC-32 was never checked (``torch.load`` does not), so the weights loaded with one
number changed: silently wrong pretrained weights."""

import zipfile

import pytest
import torch

from gspdml.errors import DataError
from gspdml.models.pretrained import read_state_dict

STATE = {"conv.weight": torch.arange(1000, dtype=torch.float32).reshape(10, 100)}


def _saved(path):
    torch.save(STATE, path)
    return path


def _flip_a_bit_of_the_weights(path):
    with zipfile.ZipFile(path) as archive:
        [record] = [info for info in archive.infolist() if "/data/" in info.filename]
    data = bytearray(path.read_bytes())
    start = record.header_offset + 30 + len(record.filename.encode()) + len(record.extra)
    data[start + 401] ^= 0x40  # inside the stored (uncompressed) bytes of the tensor
    path.write_bytes(bytes(data))
    return record.filename


def test_a_weight_record_with_a_flipped_bit_is_refused_naming_it(tmp_path):
    path = _saved(tmp_path / "weights.pth")
    record = _flip_a_bit_of_the_weights(path)
    with pytest.raises(
        DataError, match=rf"weights\.pth: record {record} does not match its CRC-32"
    ):
        read_state_dict(path)


def test_an_intact_checkpoint_reads_its_exact_weights(tmp_path):
    state = read_state_dict(_saved(tmp_path / "weights.pth"))
    assert state.keys() == STATE.keys() and torch.equal(state["conv.weight"], STATE["conv.weight"])
