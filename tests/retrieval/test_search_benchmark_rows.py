"""The search benchmark's file reader (``benchmarks/search.py``, ``RowFile``) returns the rows a
memory map of the same ``.npy`` file returns, for slices and for sorted row numbers that span
several read chunks."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def search(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # the script imports its sibling evaluation.py
    spec = importlib.util.spec_from_file_location("bench_search", BENCH / "search.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "CHUNK", 64)  # several chunks on a small file
    return module


def test_rows_read_with_pread_equal_the_mapped_rows(search, tmp_path):
    x = np.random.default_rng(0).standard_normal((300, 5)).astype(np.float32)
    np.save(tmp_path / "base.npy", x)
    rows = search.RowFile(tmp_path / "base.npy")
    assert len(rows) == 300 and rows.shape == (300, 5)
    np.testing.assert_array_equal(rows[70:201], x[70:201])
    np.testing.assert_array_equal(rows[250:400], x[250:])
    picked = np.array([0, 63, 64, 65, 127, 200, 299])
    np.testing.assert_array_equal(rows[picked], x[picked])


def test_other_layouts_are_refused(search, tmp_path):
    np.save(tmp_path / "wide.npy", np.zeros((4, 3), dtype=np.float64))
    with pytest.raises(SystemExit, match="expected a C-ordered float32 matrix, got float64"):
        search.RowFile(tmp_path / "wide.npy")
