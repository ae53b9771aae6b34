"""An index folder whose ``manifest.json`` was damaged or written by hand: a file record that is
not ``{bytes, sha256}``, a generation that is not a number, JSON nested thousands deep. Each is a
``DataError`` naming the manifest and the fix, on loading and on saving a new generation. Before,
``index.json: "x"`` failed with a bare ``AttributeError``, ``generation: "x"`` made the next save
fail with a ``ValueError`` from ``int()``, and deep nesting with a ``RecursionError``."""

import json

import pytest
import torch

from gspdml.errors import DataError
from gspdml.retrieval.generations import MANIFEST_FILE, file_record
from gspdml.retrieval.index import RetrievalIndex


def _index():
    paths = [f"/images/{i}.png" for i in range(4)]
    model = {"run_dir": "/runs/r", "weights": "sha256:" + "0" * 64}
    return RetrievalIndex(torch.eye(4, 3), paths, ["a", "a", "b", "b"], "euclidean", model)


def _damage(folder, change):
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    change(manifest)
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


@pytest.mark.parametrize("record", ["x", None, 5, {"bytes": "12", "sha256": "ab"}, {"bytes": 3}])
def test_a_file_record_that_is_not_bytes_and_sha256_is_refused(tmp_path, record):
    _index().save(tmp_path / "index")
    _damage(tmp_path / "index", lambda m: m["files"].__setitem__("index.json", record))
    with pytest.raises(
        DataError, match=r"manifest\.json: the record of 'index\.json' is .*rebuild"
    ):
        RetrievalIndex.load(tmp_path / "index")


@pytest.mark.parametrize("number", ["x", None, 0, True, 2.5])
def test_a_generation_that_is_not_a_number_is_refused_on_load_and_on_save(tmp_path, number):
    index = _index()
    index.save(tmp_path / "index")
    _damage(tmp_path / "index", lambda m: m.__setitem__("generation", number))
    with pytest.raises(DataError, match=r"manifest\.json: field 'generation' is .*rebuild"):
        RetrievalIndex.load(tmp_path / "index")
    with pytest.raises(DataError, match=r"manifest\.json: field 'generation'"):
        index.save(tmp_path / "index")


def test_a_manifest_nested_thousands_deep_is_refused(tmp_path):
    _index().save(tmp_path / "index")
    (tmp_path / "index" / MANIFEST_FILE).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match=r"not a gspdml index manifest: .*manifest\.json"):
        RetrievalIndex.load(tmp_path / "index")


def test_an_intact_manifest_loads_and_saves_the_next_generation(tmp_path):
    index = _index()
    index.save(tmp_path / "index")
    index.save(tmp_path / "index")
    loaded = RetrievalIndex.load(tmp_path / "index")
    assert torch.equal(loaded.vectors, index.vectors) and loaded.paths == index.paths
    manifest = json.loads((tmp_path / "index" / MANIFEST_FILE).read_text())
    assert manifest["generation"] == 2


def test_an_approximate_description_nested_thousands_deep_is_refused(tmp_path):
    """``ann.json`` (the approximate structure's description) is read by the same bounded reader;
    before, JSON nested 100,000 deep escaped as a bare ``RecursionError``."""
    pytest.importorskip("faiss")
    index = RetrievalIndex(
        torch.randn(64, 8, generator=torch.Generator().manual_seed(0)),
        [f"/images/{i}.png" for i in range(64)],
        ["a"] * 64,
        "euclidean",
        {"run_dir": "/runs/r", "weights": "sha256:" + "0" * 64},
    )
    index.build_approximate("hnsw", recall_sample=8)
    index.save(tmp_path / "index")
    [generation] = (tmp_path / "index").glob("generation-*")
    (generation / "ann.json").write_text("[" * 100_000 + "]" * 100_000)
    _damage(
        tmp_path / "index",
        lambda m: m["files"].__setitem__("ann.json", file_record(generation / "ann.json")),
    )
    with pytest.raises(DataError, match=r"ann\.json: not a gspdml approximate-index description"):
        RetrievalIndex.load(tmp_path / "index")
