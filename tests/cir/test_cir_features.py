"""The safetensors feature cache: hits, invalidation by model id and file changes, atomic files
with JSON metadata (no pickle)."""

import json

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors import safe_open

from gspdml.cir.features import FeatureCache, encode_image_files, encode_texts
from gspdml.errors import DataError
from tests.helpers.cir_tiny_clip import TinyCLIP, wrap


class Counting:
    """Counts encoder calls of a wrapped model."""

    def __init__(self, model):
        self.model, self.model_id, self.calls = model, model.model_id, 0

    def preprocess(self, image):
        return self.model.preprocess(image)

    def encode_image(self, pixels):
        self.calls += 1
        return self.model.encode_image(pixels)

    def encode_text(self, texts):
        self.calls += 1
        return self.model.encode_text(texts)


def write_images(folder, count=5):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        path = folder / f"img{i}.png"
        Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def test_image_features_are_cached_and_invalidated(tmp_path):
    paths = write_images(tmp_path)
    cache = FeatureCache(tmp_path / "cache")
    model = Counting(wrap(TinyCLIP()))
    direct = encode_image_files(model, paths, batch_size=2)
    assert model.calls == 3
    first = encode_image_files(model, paths, batch_size=2, cache=cache)
    torch.testing.assert_close(first, direct)
    calls = model.calls
    again = encode_image_files(model, paths, batch_size=2, cache=cache)
    assert model.calls == calls and torch.equal(again, first)  # served from the cache
    (entry,) = (tmp_path / "cache").glob("images-*.safetensors")
    with safe_open(str(entry), framework="pt") as handle:
        meta = json.loads(handle.metadata()["gspdml"])
    assert (
        meta["model"] == "tiny-clip"
        and meta["kind"] == "images"
        and meta["items"][0][0] == str(paths[0].resolve())
    )
    Image.new("RGB", (30, 30), (1, 2, 3)).save(paths[1])  # an edited file invalidates the entry
    changed = encode_image_files(model, paths, batch_size=2, cache=cache)
    assert (
        model.calls > calls
        and not torch.equal(changed[1], first[1])
        and torch.equal(changed[0], first[0])
    )
    other = Counting(wrap(TinyCLIP(seed=3), model_id="other"))
    encode_image_files(other, paths, cache=cache)
    assert other.calls == 1  # another model id never reuses features


def test_text_features_cache_and_corrupt_entries(tmp_path):
    cache = FeatureCache(tmp_path)
    model = Counting(wrap(TinyCLIP()))
    words = [f"word{i}" for i in range(7)]
    first = encode_texts(model, words, batch_size=3, cache=cache)
    assert model.calls == 3
    torch.testing.assert_close(first, model.model.encode_text(words))
    path = cache.path("tiny-clip", "texts", words)
    path.write_bytes(b"not safetensors")
    model.calls = 0
    torch.testing.assert_close(encode_texts(model, words, batch_size=3, cache=cache), first)
    assert model.calls == 3  # recomputed and rewritten
    assert encode_texts(model, words, cache=cache) is not None and model.calls == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        path.name
    ]  # no temporary files left behind


def test_errors_name_the_problem(tmp_path):
    model = wrap(TinyCLIP())
    with pytest.raises(DataError, match="no image files"):
        encode_image_files(model, [])
    (tmp_path / "bad.jpg").write_bytes(b"nope")
    with pytest.raises(DataError, match="bad.jpg: cannot decode image"):
        encode_image_files(model, [tmp_path / "bad.jpg"])
