"""A received index folder whose ``ann.faiss`` differs from what its manifest records. faiss's
reader trusts the sizes a file claims (a vector may claim up to 2**40 bytes, which it allocates
before reading), so the file is checked against the manifest's size and sha256 before faiss is
handed it, on every load: read or memory-mapped (``gspdml search`` maps it). Before, a mapped
``ann.faiss`` was checked by its size alone: a file of the same size with other bytes went to
faiss (here another index's structure, which loaded and answered searches silently)."""

import pytest
import torch

from gspdml.errors import DataError
from gspdml.retrieval.index import RetrievalIndex
from tests.helpers.retrieval import index_file

faiss = pytest.importorskip("faiss")


def _index(seed: int) -> RetrievalIndex:
    vectors = torch.randn(8, 4, generator=torch.Generator().manual_seed(seed))
    index = RetrievalIndex(vectors, [f"/images/{i}.png" for i in range(8)], [None] * 8)
    index.build_approximate("hnsw", recall_k=2, recall_sample=4)
    return index


def _never_read(*args, **kwargs):
    raise AssertionError(f"faiss.read_index{args} was called on an unchecked file")


@pytest.mark.parametrize("mmap", [False, True])
def test_an_altered_ann_faiss_is_refused_before_faiss_reads_it(tmp_path, monkeypatch, mmap):
    _index(0).save(tmp_path / "received")
    _index(1).save(tmp_path / "other")
    target = index_file(tmp_path / "received", "ann.faiss")
    other = index_file(tmp_path / "other", "ann.faiss").read_bytes()
    assert len(other) == target.stat().st_size and other != target.read_bytes()
    target.write_bytes(other)  # the same size, other bytes: only the digest tells them apart
    monkeypatch.setattr(faiss, "read_index", _never_read)
    with pytest.raises(DataError, match=f"{target}: its sha256 differs from generation 1"):
        RetrievalIndex.load(tmp_path / "received", mmap=mmap)


def test_one_flipped_byte_of_a_mapped_ann_faiss_is_refused(tmp_path, monkeypatch):
    _index(0).save(tmp_path / "received")
    target = index_file(tmp_path / "received", "ann.faiss")
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    monkeypatch.setattr(faiss, "read_index", _never_read)
    with pytest.raises(DataError, match="its sha256 differs"):
        RetrievalIndex.load(tmp_path / "received", mmap=True)


def test_an_intact_ann_faiss_still_loads_mapped_and_searches(tmp_path):
    index = _index(0)
    index.save(tmp_path / "received")
    loaded = RetrievalIndex.load(tmp_path / "received", mmap=True)
    assert loaded.approximate is not None and loaded.approximate.mmap
    found = loaded.search(index.vectors, 3).indices
    assert torch.equal(found, index.search(index.vectors, 3).indices)
