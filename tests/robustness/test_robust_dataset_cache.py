"""Hardening item 12: an empty or truncated dataset-cache entry is rebuilt (with a warning naming
it) instead of raising ``EOFError``/``BadZipFile`` on every run."""

import numpy as np
import pytest

from gspdml.data.cache import cache_dir, cache_key, cached_arrays


def _build():
    return {"x": np.arange(12.0).reshape(3, 4), "y": np.array([1, 2, 3])}


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_a_damaged_cache_entry_is_rebuilt_with_a_warning(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path))
    params = {"n": 3}
    cached_arrays("toy", params, _build)
    path = cache_dir() / f"toy-{cache_key(params)}.npz"
    whole = path.read_bytes()
    damaged = {"empty": b"", "truncated": whole[: len(whole) // 2], "garbage": b"PK\x03\x04junk"}
    path.write_bytes(damaged[damage])

    with pytest.warns(RuntimeWarning, match=f"{path}: damaged"):
        arrays = cached_arrays("toy", params, _build)
    assert all(np.array_equal(arrays[k], v) for k, v in _build().items())
    with np.load(path) as stored:  # replaced by a good entry: the next run reads it
        assert np.array_equal(stored["x"], arrays["x"]) and np.array_equal(stored["y"], arrays["y"])
