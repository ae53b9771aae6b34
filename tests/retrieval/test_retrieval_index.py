import json
import os
import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from gspdml.errors import ConfigError, DataError
from gspdml.models import Embedder
from gspdml.retrieval.build import append_to_index, model_info
from gspdml.retrieval.encoder import load_model_and_transform
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.sources import folder_source
from gspdml.training import load_run
from tests.helpers.retrieval import (
    MEAN,
    STD,
    run_cli,
    without_manifest,
    write_image_folder,
    write_run,
)


def reference_embeddings(model, paths):
    """Independent pipeline: PIL decode, shorter side to 32 (36x40 -> 32x35), centre crop 32x32,
    normalise with the run's mean/std, forward."""
    images = []
    for path in paths:
        image = Image.open(path).convert("RGB")
        w, h = image.size
        image = image.resize(
            (32, int(32 * h / w)) if w <= h else (int(32 * w / h), 32), Image.BILINEAR
        )
        array = np.asarray(image, dtype=np.float32) / 255.0
        top, left = int(round((array.shape[0] - 32) / 2)), int(round((array.shape[1] - 32) / 2))
        array = (array[top : top + 32, left : left + 32] - np.array(MEAN, np.float32)) / np.array(
            STD, np.float32
        )
        images.append(torch.from_numpy(array).permute(2, 0, 1))
    with torch.no_grad():
        return model.eval()(torch.stack(images)).embedding


def brute_force_ranking(queries, vectors):
    """Float64 python loop: indices sorted by Euclidean distance, ties by index."""
    rows = []
    for q in queries.double():
        dist = [float(torch.linalg.vector_norm(q - v)) for v in vectors.double()]
        rows.append(sorted(range(len(dist)), key=lambda j: (dist[j], j)))
    return rows


def test_index_cli_build_load_search(tmp_path, capsys):
    images = write_image_folder(tmp_path / "images")
    write_run(tmp_path / "run")
    assert (
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            tmp_path / "idx",
            "--no-progress",
        )
        == 0
    )
    index = RetrievalIndex.load(tmp_path / "idx")
    assert index.paths == sorted(str(p.resolve()) for p in images)
    assert index.labels == [os.path.basename(os.path.dirname(p)) for p in index.paths]
    assert index.dim == 32 and index.metric == "euclidean"
    assert index.model["run_dir"] == str((tmp_path / "run").resolve()) and index.model[
        "weights"
    ].startswith("sha256:")
    _, model = load_run(tmp_path / "run")
    expected = reference_embeddings(model, index.paths)
    torch.testing.assert_close(index.vectors, expected, atol=1e-5, rtol=0)

    capsys.readouterr()
    query = index.paths[4]
    assert run_cli("search", tmp_path / "idx", query, "-k", "3", "--json") == 0
    (answer,) = json.loads(capsys.readouterr().out)
    ranking = brute_force_ranking(expected[4:5], expected)[0][:3]
    assert [r["path"] for r in answer["results"]] == [index.paths[j] for j in ranking]
    assert answer["results"][0]["path"] == query and answer["results"][0][
        "distance"
    ] == pytest.approx(0, abs=1e-3)
    distances = [float(torch.linalg.vector_norm(expected[4] - expected[j])) for j in ranking]
    assert [r["distance"] for r in answer["results"]] == pytest.approx(distances, abs=1e-4)

    assert run_cli("search", tmp_path / "idx", query, "-k", "2") == 0
    text = capsys.readouterr().out.splitlines()
    assert (
        text[0] == f"query: {query}" and text[1].split()[0] == "1" and text[1].split()[2] == query
    )
    with pytest.raises(DataError, match="missing.png: query image not found"):
        run_cli("search", tmp_path / "idx", tmp_path / "missing.png")


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_exact_and_faiss_backends_rank_identically(metric):
    generator = torch.Generator().manual_seed(0)
    vectors, queries = (
        torch.randn(300, 16, generator=generator),
        torch.randn(20, 16, generator=generator),
    )
    index = RetrievalIndex(vectors, [f"g{i}" for i in range(300)], [None] * 300, metric=metric)
    exact = index.search(queries, 10, backend="torch")
    faiss = index.search(queries, 10, backend="faiss")
    assert torch.equal(exact.indices, faiss.indices)
    torch.testing.assert_close(exact.distances, faiss.distances, atol=1e-4, rtol=0)
    if metric == "cosine":
        reference = 1 - torch.nn.functional.cosine_similarity(
            queries.double()[:, None], vectors.double()[None], dim=2
        )
    else:
        reference = torch.cdist(queries.double(), vectors.double())
    assert torch.equal(exact.indices, reference.argsort(dim=1, stable=True)[:, :10])
    torch.testing.assert_close(
        exact.distances.double(), reference.sort(dim=1).values[:, :10], atol=1e-4, rtol=0
    )


def test_leave_one_out_excludes_the_query_row():
    generator = torch.Generator().manual_seed(1)
    vectors = torch.randn(12, 4, generator=generator)
    index = RetrievalIndex(vectors, [str(i) for i in range(12)], ["a"] * 6 + ["b"] * 6)
    results = index.search(vectors[[0, 7]], 4, query_labels=["a", "b"], exclude=[0, 7])
    reference = torch.cdist(vectors[[0, 7]].double(), vectors.double())
    for row, (q, own) in enumerate([(0, 0), (1, 7)]):
        order = [j for j in reference[q].argsort().tolist() if j != own][:4]
        assert results.indices[row].tolist() == order
    marks = [[r["correct"] for r in row["results"]] for row in results.rows()]
    assert marks[0] == [j < 6 for j in results.indices[0].tolist()]
    assert marks[1] == [j >= 6 for j in results.indices[1].tolist()]
    assert results.relevance().tolist() == marks and results.num_relevant.tolist() == [5, 5]


def test_append_embeds_only_new_images(tmp_path):
    write_image_folder(tmp_path / "images", classes=("red", "green"))
    write_run(tmp_path / "run")
    run_cli(
        "index", tmp_path / "run", tmp_path / "images", "--out", tmp_path / "idx", "--no-progress"
    )
    before = RetrievalIndex.load(tmp_path / "idx")
    original = before.vectors.clone()
    new_files = write_image_folder(tmp_path / "images", classes=("blue",), per_class=4, seed=3)

    _, model, transform = load_model_and_transform(tmp_path / "run", torch.device("cpu"))
    embedded = []
    model.register_forward_pre_hook(lambda module, inputs: embedded.append(inputs[0].shape[0]))
    added = append_to_index(
        before,
        model,
        folder_source(tmp_path / "images", transform),
        model_info(tmp_path / "run"),
        batch_size=3,
        progress=False,
    )
    assert added == 4 and sum(embedded) == 4

    # the CLI does the same, and the old rows stay bit-identical
    calls = []
    hook = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda module, inputs: (
            calls.append(inputs[0].shape[0]) if isinstance(module, Embedder) else None
        )
    )
    try:
        assert (
            run_cli(
                "index",
                tmp_path / "run",
                tmp_path / "images",
                "--out",
                tmp_path / "idx",
                "--append",
                "--no-progress",
            )
            == 0
        )
    finally:
        hook.remove()
    assert sum(calls) == 4
    after = RetrievalIndex.load(tmp_path / "idx")
    assert torch.equal(after.vectors[:6], original)
    assert after.paths[6:] == [str(p.resolve()) for p in new_files]
    run_cli(
        "index", tmp_path / "run", tmp_path / "images", "--out", tmp_path / "full", "--no-progress"
    )
    full = RetrievalIndex.load(tmp_path / "full")
    order = [full.paths.index(p) for p in after.paths]
    torch.testing.assert_close(after.vectors, full.vectors[order], atol=1e-5, rtol=0)
    assert [full.labels[i] for i in order] == after.labels


def test_append_refuses_other_model(tmp_path):
    write_image_folder(tmp_path / "images", per_class=1)
    write_run(tmp_path / "run")
    write_run(tmp_path / "other", seed=5)
    run_cli(
        "index", tmp_path / "run", tmp_path / "images", "--out", tmp_path / "idx", "--no-progress"
    )
    with pytest.raises(ConfigError, match="not those that built the index"):
        run_cli(
            "index",
            tmp_path / "other",
            tmp_path / "images",
            "--out",
            tmp_path / "idx",
            "--append",
            "--no-progress",
        )
    with pytest.raises(ConfigError, match="already holds an index"):
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            tmp_path / "idx",
            "--no-progress",
        )


class _Trap:
    """Unpickling this creates a folder: proof that a loader unpickled the file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def test_load_refuses_non_index_and_pickle_files(tmp_path):
    with pytest.raises(DataError, match="not a gspdml index"):
        RetrievalIndex.load(tmp_path)  # an empty folder
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(DataError, match="not a gspdml index"):
        RetrievalIndex.load(text)

    marker = str(tmp_path / "unpickled")
    trap = tmp_path / "model.pkl"
    trap.write_bytes(pickle.dumps(_Trap(marker)))
    with pytest.raises(DataError, match="not a gspdml index"):
        RetrievalIndex.load(trap)

    index = RetrievalIndex(torch.randn(3, 4), ["a", "b", "c"], [None] * 3)
    index.save(tmp_path / "idx")
    without_manifest(tmp_path / "idx")  # else the manifest's sha256 refuses any altered file
    (tmp_path / "idx" / "vectors.safetensors").write_bytes(pickle.dumps(_Trap(marker)))
    with pytest.raises(DataError, match="not safetensors"):
        RetrievalIndex.load(tmp_path / "idx")
    torch.save({"vectors": _Trap(marker)}, tmp_path / "idx" / "vectors.safetensors")
    with pytest.raises(DataError, match="vectors.safetensors"):
        RetrievalIndex.load(tmp_path / "idx")
    assert not os.path.exists(marker)

    index.save(tmp_path / "idx2")
    without_manifest(tmp_path / "idx2")
    meta = json.loads((tmp_path / "idx2" / "index.json").read_text())
    (tmp_path / "idx2" / "index.json").write_text(json.dumps({**meta, "format": "something-else"}))
    with pytest.raises(DataError, match="format is 'something-else'"):
        RetrievalIndex.load(tmp_path / "idx2")
    (tmp_path / "idx2" / "index.json").write_text(json.dumps({**meta, "version": 99}))
    with pytest.raises(DataError, match="index version 99"):
        RetrievalIndex.load(tmp_path / "idx2")
    (tmp_path / "idx2" / "index.json").write_text(
        json.dumps({**meta, "count": 2, "paths": ["a", "b"]})
    )
    with pytest.raises(DataError, match="inconsistent index"):
        RetrievalIndex.load(tmp_path / "idx2")


def test_save_load_round_trip(tmp_path):
    vectors = torch.randn(5, 3)
    index = RetrievalIndex(
        vectors,
        [f"p{i}" for i in range(5)],
        ["x", None, "y", "x", None],
        metric="cosine",
        model={"weights": "sha256:0"},
    )
    index.save(tmp_path / "idx")
    loaded = RetrievalIndex.load(tmp_path / "idx" / "index.json")
    assert (
        torch.equal(loaded.vectors, vectors)
        and loaded.labels == index.labels
        and loaded.metric == "cosine"
    )
    assert loaded.model == {"weights": "sha256:0"} and loaded.paths == index.paths


def test_broken_image_and_empty_folder_are_named(tmp_path):
    write_image_folder(tmp_path / "images", per_class=1)
    write_run(tmp_path / "run")
    broken = tmp_path / "images" / "red" / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    with pytest.raises(DataError, match="broken.png"):
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            tmp_path / "idx",
            "--no-progress",
        )
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no image files"):
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "empty",
            "--out",
            tmp_path / "idx",
            "--no-progress",
        )


def test_index_prints_progress_lines_on_stderr(tmp_path, monkeypatch, capsys):
    """The command as `gspdml index` parses and runs it, a line at every batch
    (GSPDML_PROGRESS_SECONDS=0): the count and share of images, then the closing line."""
    write_image_folder(tmp_path / "images", per_class=3)
    write_run(tmp_path / "run")
    monkeypatch.setenv("GSPDML_PROGRESS_SECONDS", "0")
    index = tmp_path / "index"
    run_cli("index", tmp_path / "run", tmp_path / "images", "--out", index, "--batch-size", "4")
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("gspdml: embedding 9 images: ")]
    assert [line.split(": ")[2].split(",")[0] for line in lines] == [
        "4/9 images (44%)",
        "8/9 images (89%)",
        "9/9 images (100%)",
        "9/9 images (100%)",
    ], err
    assert "done in" in lines[-1] and "done in" not in lines[-2]
    run_cli(
        "index",
        tmp_path / "run",
        tmp_path / "images",
        "--out",
        index,
        "--overwrite",
        "--no-progress",
    )
    assert "embedding" not in capsys.readouterr().err
