"""The one RetrievalResults type, end to end: kNN -> metrics, index search -> metrics and
report, save/load; every check against slow python loops or hand-computed cases."""

import html.parser
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from gspdml.errors import ConfigError, DataError
from gspdml.evaluation import RetrievalResults, metrics_from_results, retrieval_metrics, retrieve
from gspdml.evaluation.results import encode_labels, relevant_counts
from gspdml.evaluation.selection import ROUND_METRICS
from gspdml.retrieval.build import build_index
from gspdml.retrieval.encoder import load_model_and_transform
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.report import retrieval_grid
from gspdml.retrieval.sources import folder_source
from tests.helpers.retrieval import index_file, run_cli, write_image_folder, write_run


def slow_ranking(queries, references, excluded=None):
    """float64 loops: per query, reference rows sorted by (squared distance, index), minus the excluded row."""
    out = []
    for i, q in enumerate(queries.double().tolist()):
        dist = [sum((a - b) ** 2 for a, b in zip(q, r)) for r in references.double().tolist()]
        order = sorted(range(len(dist)), key=lambda j: (dist[j], j))
        out.append([j for j in order if excluded is None or j != excluded[i]])
    return out


def slow_map_at_r(ranking, query_labels, reference_labels, excluded=None):
    """Mean over non-lone queries of (1/R) sum_{j<=R} rel(j) P(j) (Musgrave et al. 2020, §3.2)."""
    scores = []
    for i, order in enumerate(ranking):
        r = sum(
            1
            for j, y in enumerate(reference_labels)
            if y == query_labels[i] and (excluded is None or j != excluded[i])
        )
        if r == 0:
            continue
        hits, total = 0, 0.0
        for rank, j in enumerate(order[:r], start=1):
            if reference_labels[j] == query_labels[i]:
                hits += 1
                total += hits / rank
        scores.append(total / r)
    return sum(scores) / len(scores)


def clustered(seed, n_classes=5, per_class=6, dim=8):
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(n_classes, dim, generator=generator) * 1.5
    labels = torch.arange(n_classes).repeat_interleave(per_class)
    return centres[labels] + torch.randn(len(labels), dim, generator=generator), labels


def test_knn_results_feed_the_metrics():
    x, labels = clustered(0)
    names = np.array([f"class-{int(y)}" for y in labels])
    results = retrieve(x, names)
    ranking = slow_ranking(x, x, excluded=list(range(len(x))))
    assert results.indices.tolist() == [row[: results.k] for row in ranking]
    assert results.leave_one_out and results.excluded.tolist() == list(range(len(x)))
    assert results.metric == "squared_euclidean" and results.num_relevant.tolist() == [5] * len(x)
    assert results.k == results.r_max == 5 and results.num_searchable == len(x) - 1
    expected = [[names[j] == names[i] for j in row[:5]] for i, row in enumerate(ranking)]
    assert results.relevance().tolist() == expected
    metrics = metrics_from_results(results, recall_at=(1,), metrics=ROUND_METRICS, per_class=True)
    assert metrics["map_at_r"] == pytest.approx(
        slow_map_at_r(ranking, names.tolist(), names.tolist(), list(range(len(x))))
    )
    assert set(metrics["per_class"]) == set(names.tolist())  # original string labels, not codes
    assert metrics["map_at_r"] == retrieval_metrics(x, labels, recall_at=(1,))["map_at_r"]


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_index_search_results_give_the_same_metrics_as_the_knn_engine(metric):
    x, labels = clustered(1, n_classes=4, per_class=7)
    names = [f"c{int(y)}" for y in labels]
    index = RetrievalIndex(x, [f"img/{i}.png" for i in range(len(x))], names, metric=metric)
    everyone = list(range(len(x)))
    results = index.search(x, 8, query_paths=index.paths, query_labels=names, exclude=everyone)
    assert (
        results.metric == metric
        and results.leave_one_out
        and results.num_relevant.tolist() == [6] * len(x)
    )
    vectors = torch.nn.functional.normalize(x.double(), dim=1) if metric == "cosine" else x
    ranking = slow_ranking(vectors, vectors, excluded=everyone)
    assert results.indices.tolist() == [row[:8] for row in ranking]
    from_index = metrics_from_results(results, recall_at=(1, 8), metrics=ROUND_METRICS)
    assert from_index["map_at_r"] == pytest.approx(slow_map_at_r(ranking, names, names, everyone))
    engine = retrieval_metrics(vectors, labels, recall_at=(1, 8))
    for key in ("map_at_r", "precision_at_1", "r_precision", "recall_at_k"):
        assert from_index[key] == pytest.approx(engine[key])


def test_unknown_labels_are_never_correct_and_refused_by_the_metrics():
    results = RetrievalResults.from_labels(
        torch.tensor([[1, 2], [0, 2], [0, 1]]),
        torch.tensor([[1.0, 4.0], [1.0, 3.0], [4.0, 3.0]]),
        ["a", "a", None],
        ["a", "a", None],
        excluded=[0, 1, 2],
        metric="euclidean",
    )
    assert [[r["correct"] for r in row["results"]] for row in results.rows()] == [
        [True, None],
        [True, None],
        [None, None],
    ]
    assert results.relevance().tolist() == [[True, False], [True, False], [False, False]]
    assert results.num_relevant.tolist() == [1, 1, 0] and not results.fully_labelled
    assert results.rows()[2]["label"] is None and results.rows()[0]["results"][0]["label"] == "a"
    with pytest.raises(ConfigError, match="1 queries and 1 references have none"):
        metrics_from_results(results)


def test_labels_are_coded_once_for_both_sides():
    values, q, r = encode_labels(["b", None, "a"], np.array(["a", "c", "b"]))
    assert (
        values.tolist() == ["a", "b", "c"] and q.tolist() == [1, -1, 0] and r.tolist() == [0, 2, 1]
    )
    ids = torch.tensor([2**40 + 1, 2**40, 2**40 + 1])
    values, q, r = encode_labels(ids)
    assert values.tolist() == [2**40, 2**40 + 1] and q.tolist() == [1, 0, 1] and r is q
    with pytest.raises(ConfigError, match="all integers or all strings"):
        encode_labels([1, "a", None], [1])
    with pytest.raises(ConfigError, match="got int, str"):
        encode_labels(np.array([1, 2]), np.array(["1", "2"]))  # never matched through a string cast
    with pytest.raises(ConfigError, match="not floats"):
        encode_labels(np.array([0.0, 1.0]))


def test_relevant_counts_match_a_loop():
    rng = np.random.default_rng(0)
    q, r = torch.from_numpy(rng.integers(-1, 4, 40)), torch.from_numpy(rng.integers(-1, 4, 30))
    excluded = torch.from_numpy(rng.integers(0, 30, 40))
    counts = relevant_counts(q, r, 4, excluded)
    for i in range(40):
        yi = int(q[i])
        expected = (
            0 if yi < 0 else sum(1 for j in range(30) if int(r[j]) == yi and j != int(excluded[i]))
        )
        assert int(counts[i]) == expected


def test_bad_results_are_named():
    idx, dist = torch.tensor([[0, 1]]), torch.tensor([[0.0, 1.0]])
    with pytest.raises(ConfigError, match="indices"):
        RetrievalResults.from_labels(torch.tensor([[0, 5]]), dist, [0], [0, 1])
    with pytest.raises(ConfigError, match="distances"):
        RetrievalResults.from_labels(idx, torch.zeros(1, 3), [0], [0, 1])
    with pytest.raises(ConfigError, match="reference_paths"):
        RetrievalResults.from_labels(idx, dist, [0], [0, 1], reference_paths=["a"])
    with pytest.raises(ConfigError, match="metric"):
        RetrievalResults.from_labels(idx, dist, [0], [0, 1], metric="manhattan")


def assert_same(a: RetrievalResults, b: RetrievalResults):
    for name in ("indices", "distances", "query_labels", "reference_labels", "num_relevant"):
        assert (
            torch.equal(getattr(a, name), getattr(b, name))
            and getattr(a, name).dtype == getattr(b, name).dtype
        ), name
    assert (a.excluded is None) == (b.excluded is None) and (
        a.excluded is None or torch.equal(a.excluded, b.excluded)
    )
    assert (
        a.label_values.tolist() == b.label_values.tolist()
        and a.metric == b.metric
        and a.r_max == b.r_max
    )
    assert a.query_paths == b.query_paths and a.reference_paths == b.reference_paths
    assert a.rows() == b.rows()


def test_save_load_round_trip(tmp_path):
    x, labels = clustered(2)
    gallery, gallery_labels = clustered(3)
    ids = labels + 2**40  # int64 ids beyond float32 precision stay exact
    for name, results in {
        "loo": retrieve(x, ids),
        "query_gallery": retrieve(x, ids, gallery, gallery_labels + 2**40, min_k=9),
        "index": RetrievalIndex(
            gallery,
            [f"g/{i}.png" for i in range(len(gallery))],
            [None] + ["x"] * (len(gallery) - 1),
        ).search(
            x[:4], 3, query_paths=["q0", "q1", "q2", "q3"], query_labels=["x", None, "y", "x"]
        ),
    }.items():
        results.save(tmp_path / f"{name}.safetensors")
        loaded = RetrievalResults.load(tmp_path / f"{name}.safetensors")
        assert_same(results, loaded)
        if results.fully_labelled:
            assert metrics_from_results(
                loaded, recall_at=(1,), metrics=ROUND_METRICS
            ) == metrics_from_results(results, recall_at=(1,), metrics=ROUND_METRICS)
    assert json.loads(json.dumps(loaded.rows()))[1]["label"] is None


def test_load_refuses_other_files(tmp_path):
    with pytest.raises(DataError, match="not found"):
        RetrievalResults.load(tmp_path / "missing.safetensors")
    trap = tmp_path / "results.pkl"
    trap.write_bytes(pickle.dumps({"indices": [[0]]}))
    with pytest.raises(DataError, match="not safetensors"):
        RetrievalResults.load(trap)
    RetrievalIndex(torch.randn(3, 2), ["a", "b", "c"], [None] * 3).save(tmp_path / "idx")
    with pytest.raises(DataError, match="format is 'gspdml-index'"):
        RetrievalResults.load(index_file(tmp_path / "idx", "vectors.safetensors"))
    good = retrieve(torch.randn(6, 2), [0, 0, 1, 1, 2, 2])
    good.save(tmp_path / "r.safetensors")
    tensors = {n: getattr(good, n) for n in ("indices", "distances", "query_labels")}
    save_file(
        tensors,
        str(tmp_path / "partial.safetensors"),
        metadata={"format": "gspdml-retrieval-results", "version": "1"},
    )
    with pytest.raises(DataError, match="without tensor"):
        RetrievalResults.load(tmp_path / "partial.safetensors")
    tensors["reference_labels"] = torch.tensor([0, 0, 9, 1, 1, 2])
    save_file(
        tensors,
        str(tmp_path / "bad.safetensors"),
        metadata={
            "format": "gspdml-retrieval-results",
            "version": "1",
            "metric": "squared_euclidean",
            "label_values": "[0, 1, 2]",
            "query_paths": "null",
            "reference_paths": "null",
        },
    )
    with pytest.raises(DataError, match="inconsistent.*reference_labels"):
        RetrievalResults.load(tmp_path / "bad.safetensors")


class Tiles(html.parser.HTMLParser):
    """Figures of the grid: classes, alt text of the image, caption text."""

    def __init__(self):
        super().__init__()
        self.figures, self._open = [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure":
            self._open = {"classes": attrs.get("class", "").split(), "alt": None, "text": ""}
            self.figures.append(self._open)
        if tag == "img" and self._open is not None:
            self._open["alt"] = attrs["alt"]

    def handle_endtag(self, tag):
        if tag == "figure":
            self._open = None

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data + " "


def test_index_search_to_report_grid_on_generated_images(tmp_path):
    write_image_folder(tmp_path / "images", classes=("red", "green", "blue"), per_class=3)
    write_run(tmp_path / "run")
    _, model, transform = load_model_and_transform(tmp_path / "run", torch.device("cpu"))
    source = folder_source(tmp_path / "images", transform)
    index = build_index(model, source, {"weights": "none"}, progress=False)
    chosen = [0, 4, 8]
    results = index.search(
        index.vectors[chosen],
        3,
        [index.paths[i] for i in chosen],
        [index.labels[i] for i in chosen],
        exclude=chosen,
    )
    results.save(tmp_path / "results.safetensors")
    loaded = RetrievalResults.load(tmp_path / "results.safetensors")
    pictures = {i: np.full((4, 4, 3), i / 10) for i in range(len(index))}
    page = retrieval_grid(loaded, pictures, chosen, [None] * 3)
    assert page == retrieval_grid(results, pictures, chosen, [None] * 3)

    tiles = Tiles()
    tiles.feed(page)
    found = [f for f in tiles.figures if "result" in f["classes"]]
    assert len(found) == 9
    ranking = slow_ranking(index.vectors[chosen], index.vectors, excluded=chosen)
    for q, own in enumerate(chosen):
        for rank, (tile, j) in enumerate(zip(found[3 * q : 3 * q + 3], ranking[q][:3]), start=1):
            folder = Path(index.paths[j]).parent.name  # the label is the image's folder
            assert (
                tile["alt"] == index.paths[j]
                and f"#{rank} " in tile["text"]
                and folder in tile["text"]
            )
            assert ("correct" in tile["classes"]) == (folder == Path(index.paths[own]).parent.name)
            distance = math.dist(index.vectors[own].tolist(), index.vectors[j].tolist())
            assert f"d={distance:.3f}" in tile["text"]


def test_search_cli_prints_the_shared_rows(tmp_path, capsys):
    write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=2)
    write_run(tmp_path / "run")
    run_cli(
        "index", tmp_path / "run", tmp_path / "images", "--out", tmp_path / "idx", "--no-progress"
    )
    index = RetrievalIndex.load(tmp_path / "idx")
    capsys.readouterr()
    saved = tmp_path / "out" / "results.safetensors"
    assert (
        run_cli("search", tmp_path / "idx", index.paths[0], "-k", "4", "--json", "--save", saved)
        == 0
    )
    (row,) = json.loads(capsys.readouterr().out)
    assert RetrievalResults.load(saved).rows() == [row]
    assert row["query"] == index.paths[0] and row["label"] is None and row["metric"] == "euclidean"
    assert [r["index"] for r in row["results"]] == slow_ranking(index.vectors[:1], index.vectors)[0]
    assert [r["path"] for r in row["results"]] == [index.paths[r["index"]] for r in row["results"]]
    assert [r["label"] for r in row["results"]] == [
        index.labels[r["index"]] for r in row["results"]
    ]
    assert all(r["correct"] is None for r in row["results"])  # a query image has no label


def test_hits_are_the_typed_rows_and_the_text_reads_them():
    """``hits()`` holds what ``rows()`` serialises, as attributes; ``format_text`` prints a
    query's path (or ``#row``), rank, distance, path and label of each hit."""
    results = RetrievalResults.from_labels(
        torch.tensor([[1, 2], [0, 2]]),
        torch.tensor([[0.25, 4.0], [0.25, 1.5]]),
        ["a", None],
        ["a", "a", "b"],
        reference_paths=["r0.png", "r1.png", "r2.png"],
    )
    hits = results.hits()
    assert [row.query_index for row in hits] == [0, 1] and hits[1].label is None
    assert [(h.rank, h.index, h.path, h.label, h.correct) for h in hits[0].results] == [
        (1, 1, "r1.png", "a", True),
        (2, 2, "r2.png", "b", False),
    ]
    assert results.rows()[0]["results"][1] == {
        "rank": 2,
        "index": 2,
        "path": "r2.png",
        "label": "b",
        "distance": 4.0,
        "correct": False,
    }
    assert results.format_text().splitlines() == [
        "query: #0  [a]",
        "    1  0.250000  r1.png  [a]",
        "    2  4.000000  r2.png  [b]",
        "query: #1",
        "    1  0.250000  r0.png  [a]",
        "    2  1.500000  r2.png  [b]",
    ]
