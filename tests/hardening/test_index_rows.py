"""The rows of a received or damaged index folder are checked when it is read: a vector holding
NaN or an infinity, a path that is not a string, a label that is neither a string nor null are a
``DataError`` naming the file, the row and the fix. Before, such an index loaded: NaN rows made
every later search fail with "reference: contains NaN or infinite values" (no file named), a
numeric path made ``gspdml index --append`` fail with a bare ``TypeError``."""

import json

import pytest
import torch

from gspdml.errors import MAX_JSON_BYTES, DataError
from gspdml.retrieval.generations import MANIFEST_FILE, file_record
from gspdml.retrieval.index import ROW_JSON_BYTES, RetrievalIndex
from tests.helpers.retrieval import without_manifest

MODEL = {"run_dir": "/runs/r", "weights": "sha256:" + "0" * 64}
PATHS = [f"/images/{i}.png" for i in range(5)]


def _saved(folder, vectors=None, paths=PATHS, labels=("a", "a", "b", "b", None)):
    vectors = (
        torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
        if vectors is None
        else vectors
    )
    RetrievalIndex(vectors, list(paths), list(labels), "euclidean", MODEL).save(folder)
    return folder


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("mmap", [False, True])
def test_a_stored_vector_that_is_not_finite_is_refused_naming_its_row(tmp_path, bad, mmap):
    vectors = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    vectors[3, 1] = bad
    vectors[4, 0] = bad
    folder = _saved(tmp_path / "index", vectors)
    with pytest.raises(
        DataError,
        match=r"vectors\.safetensors: row 3 \(/images/3\.png\) holds NaN or infinite "
        r"values \(2 of 5 rows\); .*rebuild",
    ):
        RetrievalIndex.load(folder, mmap=mmap)


@pytest.mark.parametrize(
    ("paths", "labels", "named"),
    [
        ([*PATHS[:2], 7, *PATHS[3:]], ["a"] * 5, r"paths\[2\] is 7, not a file path"),
        (PATHS, ["a", ["b"], "a", "a", "a"], r'labels\[1\] is \["b"\], not a class name or null'),
        (PATHS, ["a", "a", "a", "a", 3], r"labels\[4\] is 3, not a class name or null"),
    ],
)
def test_a_path_or_label_of_another_type_is_refused_naming_it(tmp_path, paths, labels, named):
    folder = _saved(tmp_path / "index", paths=paths, labels=labels)
    with pytest.raises(DataError, match=r"index\.json: " + named):
        RetrievalIndex.load(folder)


def test_an_unknown_metric_is_refused_naming_the_file(tmp_path):
    folder = _saved(tmp_path / "index")
    meta = next(folder.glob("generation-*")) / "index.json"
    # the manifest pins the bytes: rewrite it with the metric changed and its new record
    meta.write_text(meta.read_text().replace('"euclidean"', '"manhattan"'))
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    manifest["files"]["index.json"] = file_record(meta)
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"index\.json: field 'metric' is \"manhattan\"; allowed"):
        RetrievalIndex.load(folder)


def test_finite_rows_with_null_labels_load(tmp_path):
    folder = _saved(tmp_path / "index")
    loaded = RetrievalIndex.load(folder)
    assert loaded.paths == PATHS and loaded.labels == ["a", "a", "b", "b", None]


def test_an_index_of_more_rows_than_a_side_file_holds_is_read_back(tmp_path):
    """index.json grows with the gallery (a path and a label per row): its bound is
    MAX_JSON_BYTES plus ROW_JSON_BYTES per stored vector. Before, the 16 MiB bound of the small
    side files refused an index gspdml had just written, of 200,000 images with 100-character
    paths, as 'not a gspdml index'."""
    count = 200_000
    folder = tmp_path / "index"
    paths = [
        f"/data/collection/2024/holiday/album-{i:07d}/photo-{i:07d}-{'x' * 40}.jpg"
        for i in range(count)
    ]
    labels = [f"class-{i % 1000:04d}" for i in range(count)]
    RetrievalIndex(torch.zeros(count, 2), paths, labels, "euclidean", MODEL).save(folder)
    [meta] = folder.glob("generation-*/index.json")
    assert meta.stat().st_size > MAX_JSON_BYTES
    loaded = RetrievalIndex.load(folder)
    assert len(loaded) == count and loaded.paths[-1] == paths[-1]


def test_an_index_json_larger_than_its_rows_need_is_refused_before_reading(tmp_path):
    folder = without_manifest(_saved(tmp_path / "index"))  # 5 rows; no manifest pins the size
    with open(folder / "index.json", "r+b") as handle:  # sparse: nothing to read until parsing
        handle.truncate(MAX_JSON_BYTES + 5 * ROW_JSON_BYTES + 1)
    with pytest.raises(DataError, match=r"index\.json: not a gspdml index .* bytes, more than"):
        RetrievalIndex.load(folder)
