"""The write policy of an index folder and the approximate-search policy, called as library
functions (``gspdml index`` and ``gspdml search`` only parse and print around them):
:func:`~gspdml.retrieval.index_folder.write_index`, :func:`~gspdml.retrieval.approximate.update_ann`,
:func:`~gspdml.retrieval.approximate.search_approximate` and
:func:`~gspdml.retrieval.index_folder.embed_queries`."""

from pathlib import Path

import pytest
import torch

from gspdml.errors import ConfigError, DataError
from gspdml.retrieval import ann
from gspdml.retrieval.approximate import AnnRequest, search_approximate, update_ann
from gspdml.retrieval.encoder import Encoder
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.index_folder import embed_queries, write_index
from tests.helpers.retrieval import write_image_folder, write_run


def _random_index(rows: int = 300, dim: int = 8) -> RetrievalIndex:
    vectors = torch.randn(rows, dim, generator=torch.Generator().manual_seed(0))
    return RetrievalIndex(vectors, [f"{i}.png" for i in range(rows)], [None] * rows)


def test_the_recall_defaults_live_in_the_ann_module():
    assert (AnnRequest.recall_k, AnnRequest.recall_sample) == (ann.RECALL_K, ann.RECALL_SAMPLE)
    assert (ann.RECALL_K, ann.RECALL_SAMPLE) == (10, 1000)
    assert (AnnRequest.hnsw_m, AnnRequest.train_per_list) == (
        ann.AnnParams.hnsw_m,
        ann.AnnParams.train_per_list,
    )


def test_write_index_builds_refuses_to_replace_and_appends_without_re_embedding(tmp_path):
    write_image_folder(tmp_path / "images", classes=("red", "green"))
    write_run(tmp_path / "run")
    out, notes = tmp_path / "idx", []

    def write(**options):
        return write_index(
            tmp_path / "run", out, tmp_path / "images", note=notes.append, progress=False, **options
        )

    written = write()
    assert written.lines() == [
        f"indexed 6 images; {out}: 6 vectors of dim {written.index.dim}, metric euclidean"
    ]
    saved = RetrievalIndex.load(out)
    expected = Encoder(tmp_path / "run", device="cpu")(saved.paths)
    torch.testing.assert_close(saved.vectors, expected, rtol=1e-5, atol=1e-6)

    with pytest.raises(ConfigError, match="already holds an index; pass --append"):
        write()
    with pytest.raises(ConfigError, match="give either an IMAGES_DIR or --split"):
        write_index(tmp_path / "run", out, tmp_path / "images", "test", note=notes.append)
    with pytest.raises(ConfigError, match="holds no index to append to"):
        write_index(
            tmp_path / "run", tmp_path / "none", tmp_path / "images", note=print, append=True
        )

    (tmp_path / "images" / "red" / "0.png").unlink()
    write_image_folder(tmp_path / "images", classes=("blue",), per_class=2, seed=3)
    appended = write(append=True)
    assert appended.done == "added 2 images (5 already indexed, 1 dropped)"
    assert notes == [
        f"dropped {(tmp_path / 'images' / 'red' / '0.png').resolve()}: the file no longer exists"
    ]
    kept = RetrievalIndex.load(out)
    rows = {path: row for row, path in enumerate(saved.paths)}
    old = [rows[path] for path in kept.paths[:5]]  # kept as they were: not re-embedded
    assert len(kept) == 7 and kept.vectors[:5].equal(saved.vectors[old])


def test_a_failing_image_saves_the_rows_embedded_before_it(tmp_path):
    """Ten images embedded one a batch, in chunks of eight: the last one fails to decode."""
    write_image_folder(tmp_path / "images", classes=("green", "red"), per_class=5)
    write_run(tmp_path / "run")
    broken = tmp_path / "images" / "red" / "4.png"
    broken.write_bytes(b"not an image")
    options = {"note": print, "progress": False, "batch_size": 1}
    with pytest.raises(DataError, match=r"8 images embedded before it are saved in .*--append"):
        write_index(tmp_path / "run", tmp_path / "idx", tmp_path / "images", **options)
    assert len(RetrievalIndex.load(tmp_path / "idx")) == 8
    notes: list[str] = []
    options.update(note=notes.append, on_error="skip")
    written = write_index(tmp_path / "run", tmp_path / "idx2", tmp_path / "images", **options)
    assert written.lines()[0].startswith("indexed 9 images, 1 files skipped")
    assert len(notes) == 1 and notes[0].startswith(f"skipped {broken.resolve()}: ")


def test_update_ann_builds_keeps_its_backend_on_append_and_drops_for_exact(tmp_path):
    pytest.importorskip("faiss")
    index = _random_index()
    request = AnnRequest("hnsw", ef=32, recall_k=5, recall_sample=50)
    line = update_ann(index, tmp_path, request, append=False)
    assert index.approximate is not None and index.approximate.params.ef == 32
    assert line.startswith("approximate search (hnsw, ef 32): recall@5 = ")
    assert index.approximate.recall["sample"] == 50

    with pytest.raises(ConfigError, match="holds a hnsw index; --append cannot change it to ivf"):
        update_ann(index, tmp_path, AnnRequest("ivf"), append=True)
    index.add(torch.randn(20, 8), [f"new{i}.png" for i in range(20)], [None] * 20)
    line = update_ann(index, tmp_path, AnnRequest(ef=48, recall_k=5), append=True)
    assert index.approximate.count == 320 and index.approximate.params.ef == 48
    assert "ef 48" in line

    assert update_ann(index, tmp_path, AnnRequest("exact"), append=False) == ""
    assert index.approximate is None
    with pytest.raises(ConfigError, match="has no approximate index to append to; rebuild"):
        update_ann(index, tmp_path, AnnRequest("hnsw"), append=True)
    assert update_ann(index, tmp_path, AnnRequest(), append=True) == ""


def test_search_approximate_answers_only_with_a_structure_and_without_exact(tmp_path):
    index, queries = _random_index(), torch.randn(3, 8)
    assert search_approximate(index, tmp_path, queries, 4, ["a", "b", "c"]) is None
    with pytest.raises(ConfigError, match="has no approximate index") as error:
        search_approximate(index, tmp_path, queries, 4, ["a", "b", "c"], ef=10)
    assert error.value.field == "--ef"
    pytest.importorskip("faiss")
    index.build_approximate(ann.AnnParams("hnsw"), recall_k=5, recall_sample=50)
    assert search_approximate(index, tmp_path, queries, 4, ["a", "b", "c"], exact=True) is None
    found = search_approximate(index, tmp_path, queries, 4, ["a", "b", "c"], ef=200)
    assert found is not None and "ef 200" in found[1]
    exact = index.search(queries, 4, exact=True)
    assert found[0].indices.equal(exact.indices)  # ef 200 over 300 rows visits them all


def test_embed_queries_finds_the_run_and_checks_the_query_files(tmp_path):
    write_image_folder(tmp_path / "images", classes=("red", "green"))
    write_run(tmp_path / "run")
    write_index(tmp_path / "run", tmp_path / "idx", tmp_path / "images", note=print, progress=False)
    query = tmp_path / "images" / "red" / "2.png"
    found = embed_queries(tmp_path / "idx", [query], device="cpu")
    assert found.paths == [str(query.resolve())]
    torch.testing.assert_close(found.queries, Encoder(tmp_path / "run", device="cpu")([query]))
    with pytest.raises(DataError, match="query image not found"):
        embed_queries(tmp_path / "idx", [tmp_path / "missing.png"], device="cpu")
    moved = Path(tmp_path / "moved")
    (tmp_path / "run").rename(moved)
    with pytest.raises(ConfigError, match="is gone \\(moved or deleted\\); pass --run RUN_DIR"):
        embed_queries(tmp_path / "idx", [query], device="cpu")
    assert embed_queries(tmp_path / "idx", [query], run=moved, device="cpu").paths == found.paths
