"""Approximate indexes: recall measured against a brute-force reference, persistence, append, CLI."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError, DataError
from gspdml.retrieval import ann
from gspdml.retrieval.index import RetrievalIndex
from tests.helpers.retrieval import index_file, run_cli, write_image_folder, write_run


def clustered(n, dim=16, clusters=20, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    return (centres[rng.integers(0, clusters, n)] + 0.4 * rng.normal(size=(n, dim))).astype(
        np.float32
    )


def squared_distances(queries, x, rows):
    """float64 squared distances [Q, k] from each query to its rows of ``x``."""
    return (
        (torch.from_numpy(queries).double()[:, None] - torch.from_numpy(x).double()[rows]) ** 2
    ).sum(-1)


def brute_force_recall(approx_rows, x, sample, k):
    """Python loop over the sample: exact neighbours from a float64 argsort (own row removed),
    |A ∩ E| / k averaged; the approximate lists come straight from faiss (own row removed)."""
    x64 = x.astype(np.float64)
    total = 0.0
    for q, found in zip(sample, approx_rows):
        dist = ((x64 - x64[q]) ** 2).sum(1)
        exact = [j for j in sorted(range(len(x)), key=lambda j: (dist[j], j)) if j != q][:k]
        approx = [j for j in found if j != q and j >= 0][:k]
        total += len(set(exact) & set(approx)) / k
    return total / len(sample)


@pytest.mark.parametrize(
    "backend,knob",
    [
        ("ivf", {"nprobe": 1}),
        ("ivf", {"nprobe": 8}),
        ("ivfpq", {"nprobe": 2, "rerank": 1}),
        ("hnsw", {"ef": 4}),
    ],
)
def test_measured_recall_matches_brute_force(backend, knob):
    x = clustered(1500)
    params = ann.AnnParams(backend, nlist=16, pq_m=4, hnsw_m=4, ef_construction=8, **knob)
    rows, train_rows = ann.held_out(len(x), 60)
    index = ann.build(x, params, train_rows)
    measured = ann.measure_recall(index, params, x, rows, 5)
    ann.configure(index, params)
    if backend == "ivfpq":  # the reference re-ranks the PQ candidates by exact distance itself
        _, cand = index.search(x[rows], params.rerank * 6)
        approx = [
            sorted(
                (j for j in c if j >= 0),
                key=lambda j: (((x[j] - x[q]).astype(np.float64) ** 2).sum(), j),
            )[:6]
            for q, c in zip(rows, cand)
        ]
    else:
        approx = index.search(x[rows], 6)[1]
    expected = brute_force_recall(approx, x, rows, 5)
    assert measured["recall"] == pytest.approx(expected, abs=1e-12)
    assert measured["k"] == 5 and measured["sample"] == 60
    assert 0.0 < measured["recall"] <= 1.0


@pytest.mark.parametrize("backend", ["ivf", "ivfpq"])
@pytest.mark.parametrize("nprobe", [1, 3, 16, 40])
def test_search_in_parallel_mode_3_equals_faiss_default_mode(backend, nprobe):
    """ann.search runs faiss's inverted files in parallel mode 3 (for speed); faiss's default
    mode 0 is the reference, including nprobe above the 16 cells (all of them)."""
    import faiss

    x = clustered(2000)
    params = ann.AnnParams(backend, nlist=16, pq_m=4, nprobe=nprobe, rerank=1)
    index = ann.build(x, params)
    queries = clustered(50, seed=1)
    dist, rows = ann.search(index, params, queries, 7, vectors=x)
    assert faiss.extract_index_ivf(index).parallel_mode == 3
    faiss.extract_index_ivf(index).parallel_mode = 0
    _, cand = index.search(queries, 7)
    if backend == "ivfpq":  # rerank 1: the same 7 PQ candidates, re-ordered by exact distance
        assert [set(r) for r in rows.tolist()] == [set(c) for c in cand.tolist()]
        torch.testing.assert_close(dist, squared_distances(queries, x, rows), rtol=0, atol=1e-9)
    else:
        np.testing.assert_array_equal(rows.numpy(), cand)
        torch.testing.assert_close(
            dist, squared_distances(queries, x, torch.from_numpy(cand)), rtol=1e-5, atol=1e-4
        )


def test_recall_rises_with_nprobe_and_the_held_out_rows_skip_training():
    x = clustered(3000, clusters=64)
    rows, train_rows = ann.held_out(len(x), 100)
    assert not set(rows) & set(train_rows) and len(rows) + len(train_rows) == len(x)
    params = ann.AnnParams("ivf", nlist=64, nprobe=1)
    index = ann.build(x, params, train_rows)
    low = ann.measure_recall(index, params, x, rows, 10)["recall"]
    params.nprobe = 64  # every cell: exhaustive
    assert ann.measure_recall(index, params, x, rows, 10)["recall"] == 1.0 > low


def test_save_load_mmap_and_append_without_retraining(tmp_path):
    x = clustered(2000)
    built = ann.build_measured(x[:1500], ann.AnnParams("ivf", nlist=16), k=5, sample=50)
    built.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [ann.ANN_FILE, ann.ANN_META]
    mapped = ann.AnnIndex.load(tmp_path, 1500)
    assert mapped.mmap and mapped.count == 1500 and mapped.recall == built.recall
    with pytest.raises(DataError, match="holds 1500 vectors, the index 1499"):
        ann.AnnIndex.load(tmp_path, 1499)

    import faiss

    centroids = faiss.extract_index_ivf(built.index).quantizer.reconstruct_n(0, 16)
    grown = ann.AnnIndex.load(tmp_path, 1500, mmap=False)
    ann.append_measured(grown, x, 500, k=5, sample=50)
    assert grown.count == 2000
    np.testing.assert_array_equal(
        faiss.extract_index_ivf(grown.index).quantizer.reconstruct_n(0, 16), centroids
    )
    _, found = ann.search(grown.index, grown.params, x[1990:], 1)  # appended rows find themselves
    assert found[:, 0].tolist() == list(range(1990, 2000))


@pytest.mark.parametrize("backend", ["ivf", "ivfpq"])
def test_the_quantiser_is_the_kmeans_of_the_asked_sample_and_rounds(backend):
    """The coarse centroids equal faiss.Kmeans run independently with the asked rounds on the
    whole training pool (pool = nlist x train_per_list rows, so the sample is all of it). 300
    vectors per cell is above faiss's own cap of 256: left in place, faiss would subsample."""
    import faiss

    x = clustered(2600, clusters=4)
    pool = np.arange(2400)
    params = ann.AnnParams(backend, nlist=8, train_per_list=300, kmeans_iters=3, pq_m=4)
    index = ann.build(x, params, train_rows=pool)
    reference = faiss.Kmeans(16, 8, niter=3, seed=params.seed, max_points_per_centroid=300)
    reference.train(x[pool])
    got = faiss.extract_index_ivf(index).quantizer.reconstruct_n(0, 8)
    np.testing.assert_allclose(got, reference.centroids, rtol=0, atol=1e-5)
    other = ann.build(
        x, ann.AnnParams(backend, nlist=8, train_per_list=300, pq_m=4), train_rows=pool
    )  # 25 rounds
    assert np.abs(faiss.extract_index_ivf(other).quantizer.reconstruct_n(0, 8) - got).max() > 1e-3


@pytest.mark.parametrize("backend", ["ivf", "ivfpq"])
def test_with_a_gpu_the_kmeans_assigns_through_a_gpu_flat_index_and_the_index_stays_on_the_cpu(
    backend, monkeypatch
):
    """faiss-gpu: the quantiser's k-means runs its assignments through the index
    ``index_cpu_to_all_gpus`` returns (here a CPU flat index standing in for it, so the test runs
    anywhere); the trained index equals the one built without a GPU and keeps no pointer to it."""
    import faiss

    x = clustered(2600, clusters=4)
    params = ann.AnnParams(backend, nlist=8, train_per_list=300, kmeans_iters=3, pq_m=4)
    plain = ann.build(x, params)
    moved = []

    def to_gpus(flat):
        moved.append(flat)
        return flat

    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)
    monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", to_gpus)
    on_gpu = ann.build(x, params)
    assert len(moved) == 1 and moved[0].ntotal == 8  # the k-means centroids went through it
    ivf = faiss.extract_index_ivf(on_gpu)
    assert ivf.clustering_index is None
    np.testing.assert_array_equal(
        ivf.quantizer.reconstruct_n(0, 8),
        faiss.extract_index_ivf(plain).quantizer.reconstruct_n(0, 8),
    )


def test_bad_parameters_are_named():
    with pytest.raises(ConfigError, match="unknown approximate backend 'lsh'"):
        ann.AnnParams("lsh")
    with pytest.raises(ConfigError, match="--nprobe.*must be >= 1"):
        ann.AnnParams("ivf", nprobe=0)
    with pytest.raises(ConfigError, match="--train-per-list.*must be >= 1, got 0"):
        ann.AnnParams("ivf", train_per_list=0)
    with pytest.raises(ConfigError, match="--kmeans-iters.*must be >= 1, got -2"):
        ann.AnnParams("ivf", kmeans_iters=-2)
    with pytest.raises(ConfigError, match="--pq-m.*must divide the dimension 16, got 5"):
        ann.build(clustered(500), ann.AnnParams("ivfpq", nlist=4, pq_m=5))


def test_cli_builds_appends_and_searches_with_measured_recall(tmp_path, capsys):
    write_image_folder(tmp_path / "images", per_class=6)
    write_run(tmp_path / "run")
    idx = tmp_path / "idx"
    assert (
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            idx,
            "--no-progress",
            "--backend",
            "hnsw",
            "--recall-k",
            "3",
            "--recall-sample",
            "10",
        )
        == 0
    )
    out = capsys.readouterr().out
    meta = json.loads(index_file(idx, ann.ANN_META).read_text())
    assert (
        meta["recall"]["k"] == 3
        and meta["recall"]["sample"] == 10
        and meta["params"]["backend"] == "hnsw"
    )
    assert f"recall@3 = {meta['recall']['recall']:.4f}" in out

    index = RetrievalIndex.load(idx)
    query = index.paths[2]
    assert run_cli("search", idx, query, "-k", "4", "--json") == 0
    captured = capsys.readouterr()
    approximate = [r["path"] for r in json.loads(captured.out)[0]["results"]]
    assert "approximate search (hnsw, ef 64)" in captured.err
    assert run_cli("search", idx, query, "-k", "4", "--json", "--exact") == 0
    exact = [r["path"] for r in json.loads(capsys.readouterr().out)[0]["results"]]
    assert approximate == exact  # 18 vectors, ef 64: the graph search is exhaustive
    assert run_cli("search", idx, query, "-k", "4", "--ef", "8") == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "(hnsw, ef 8): recall@3" in line and line.endswith(
        "at ef 64 (this search uses other settings: recall not measured for them)"
    )

    write_image_folder(tmp_path / "images", classes=("yellow",), per_class=3, seed=5)
    assert (
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            idx,
            "--append",
            "--no-progress",
        )
        == 0
    )
    assert ann.AnnIndex.load(index_file(idx, ""), 21).count == 21
    Path(
        index.paths[0]
    ).unlink()  # a vanished file: the append drops its row and rebuilds the hnsw index
    assert (
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            idx,
            "--append",
            "--no-progress",
        )
        == 0
    )
    assert "1 dropped" in capsys.readouterr().out
    rebuilt = ann.AnnIndex.load(index_file(idx, ""), 20)
    assert rebuilt.count == 20 and rebuilt.params.backend == "hnsw"
    with pytest.raises(ConfigError, match="holds a hnsw index; --append cannot change it to ivf"):
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            idx,
            "--append",
            "--backend",
            "ivf",
            "--no-progress",
        )

    assert (
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            idx,
            "--overwrite",
            "--no-progress",
        )
        == 0
    )
    assert not index_file(idx, ann.ANN_META).exists() and not index_file(idx, ann.ANN_FILE).exists()
    assert [p.name for p in idx.iterdir() if p.is_dir()] == [index_file(idx, "").name]
    with pytest.raises(ConfigError, match="has no approximate index"):
        run_cli("search", idx, query, "--nprobe", "4")


def test_cli_passes_the_kmeans_settings_and_older_descriptions_still_load(tmp_path):
    write_image_folder(tmp_path / "images", per_class=6)
    write_run(tmp_path / "run")
    idx = tmp_path / "idx"
    assert (
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            idx,
            "--no-progress",
            "--backend",
            "ivf",
            "--nlist",
            "2",
            "--train-per-list",
            "5",
            "--kmeans-iters",
            "2",
            "--recall-sample",
            "4",
        )
        == 0
    )
    meta = json.loads(index_file(idx, ann.ANN_META).read_text())
    assert (
        meta["params"]["train_per_list"],
        meta["params"]["kmeans_iters"],
        meta["params"]["nlist"],
    ) == (5, 2, 2)
    for key in ("train_per_list", "kmeans_iters"):  # written before these settings existed
        del meta["params"][key]
    index_file(idx, ann.ANN_META).write_text(json.dumps(meta))
    _, params, _ = ann.read_description(index_file(idx, ""))
    assert (params.train_per_list, params.kmeans_iters) == (64, 25)


def test_ivfpq_search_reranks_by_exact_distance():
    x = clustered(1200)
    params = ann.AnnParams("ivfpq", nlist=8, pq_m=4, nprobe=8, rerank=8)
    index = ann.build(x, params)
    dist, rows = ann.search(index, params, x[:20], 5, vectors=x)
    torch.testing.assert_close(dist, squared_distances(x[:20], x, rows), rtol=0, atol=1e-9)
    assert (dist[:, 1:] >= dist[:, :-1]).all()


def test_search_with_postprocessing_matches_the_library_call(tmp_path, capsys):
    from gspdml.evaluation.postprocess import postprocessed_retrieve
    from gspdml.models.inference import embed
    from gspdml.retrieval.encoder import load_model_and_transform
    from gspdml.retrieval.sources import ImageFiles

    write_image_folder(tmp_path / "images", per_class=5)
    write_run(tmp_path / "run")
    idx = tmp_path / "idx"
    run_cli("index", tmp_path / "run", tmp_path / "images", "--out", idx, "--no-progress")
    index = RetrievalIndex.load(idx)
    query = index.paths[3]
    capsys.readouterr()
    assert (
        run_cli(
            "search",
            idx,
            query,
            "-k",
            "4",
            "--json",
            "--postprocess",
            "dba:k=2",
            "--postprocess",
            "qe:k=1,alpha=2.0",
        )
        == 0
    )
    got = [r["path"] for r in json.loads(capsys.readouterr().out)[0]["results"]]
    _, model, transform = load_model_and_transform(tmp_path / "run", torch.device("cpu"))
    vector, _ = embed(model, ImageFiles([query], [None], transform), 4)
    want = postprocessed_retrieve(
        vector, [None], index.vectors, index.labels, steps=["dba:k=2", "qe:k=1,alpha=2.0"], min_k=4
    )
    assert got == [index.paths[j] for j in want.indices[0, :4].tolist()]
    with pytest.raises(ConfigError, match="unknown post-processing step 'rerank'"):
        run_cli("search", idx, query, "--postprocess", "rerank")


@pytest.mark.parametrize("backend", ["ivf", "hnsw"])
def test_python_api_does_what_the_cli_does(tmp_path, capsys, backend):
    """An index built in Python with build_approximate (same settings) measures the same recall
    and searches the same neighbours as ``gspdml index --backend`` / ``gspdml search``, and
    appending rows then update_approximate equals ``gspdml index --append``. Before, approximate
    search existed only in the CLI: RetrievalIndex had no build_approximate."""
    from gspdml.models.inference import embed
    from gspdml.retrieval.encoder import load_model_and_transform
    from gspdml.retrieval.sources import ImageFiles

    write_image_folder(tmp_path / "images", per_class=8)
    write_run(tmp_path / "run")
    idx = tmp_path / "idx"
    ivf = backend == "ivf"
    settings = (
        ["--nlist", "2", "--train-per-list", "8", "--nprobe", "1"]
        if ivf
        else ["--ef", "2", "--hnsw-m", "2"]
    )
    assert (
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            idx,
            "--no-progress",
            "--backend",
            backend,
            *settings,
            "--recall-k",
            "3",
            "--recall-sample",
            "6",
        )
        == 0
    )
    cli_index = RetrievalIndex.load(idx)
    python = RetrievalIndex(cli_index.vectors, cli_index.paths, cli_index.labels, cli_index.metric)
    knobs = {"nlist": 2, "train_per_list": 8, "nprobe": 1} if ivf else {"ef": 2, "hnsw_m": 2}
    built = python.build_approximate(ann.AnnParams(backend, **knobs), recall_k=3, recall_sample=6)
    assert built.recall == cli_index.approximate.recall

    query = python.paths[5]
    capsys.readouterr()
    assert run_cli("search", idx, query, "-k", "5", "--json") == 0
    cli_rows = json.loads(capsys.readouterr().out)[0]["results"]
    _, model, transform = load_model_and_transform(tmp_path / "run", torch.device("cpu"))
    vector, _ = embed(model, ImageFiles([query], [None], transform), 4)
    got = python.search(vector, 5)
    assert [python.paths[j] for j in got.indices[0].tolist()] == [r["path"] for r in cli_rows]
    assert got.distances[0].tolist() == pytest.approx([r["distance"] for r in cli_rows], abs=1e-6)
    exact = python.search(vector, 5, exact=True)
    assert exact.indices[0, 0] == got.indices[0, 0]  # the query's own image, found both ways

    write_image_folder(tmp_path / "images", classes=("yellow",), per_class=3, seed=5)
    assert (
        run_cli(
            "index",
            tmp_path / "run",
            tmp_path / "images",
            "--out",
            idx,
            "--append",
            "--no-progress",
            "--recall-k",
            "3",
            "--recall-sample",
            "6",
        )
        == 0
    )
    grown = RetrievalIndex.load(idx)
    python.add(
        grown.vectors[len(python) :], grown.paths[len(python) :], grown.labels[len(python) :]
    )
    with pytest.raises(DataError, match="holds 24 vectors, the index 27"):
        python.search(vector, 5)
    assert python.update_approximate(recall_k=3, recall_sample=6).recall == grown.approximate.recall
    python.save(tmp_path / "python")
    assert RetrievalIndex.load(tmp_path / "python").approximate.count == 27
