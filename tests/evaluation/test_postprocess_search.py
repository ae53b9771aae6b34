"""Post-processors as registered components that work on search results: the index's search
applies them as the evaluation does."""

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation import postprocess as pp
from gspdml.retrieval.index import RetrievalIndex


def clusters(n, seed, dim=8, classes=12):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    x = rng.normal(size=(classes, dim))[labels] + 0.6 * rng.normal(size=(n, dim))
    return torch.from_numpy(x.astype(np.float32)), labels.tolist()


STEPS = [
    "pca_whiten:dim=6",
    {"name": "dba", "k": 2},
    {"qe": {"k": 3, "alpha": 2.0}},
    {"name": "k_reciprocal", "k1": 6, "k2": 3, "lambda": 0.4, "shortlist": 25},
]


@pytest.mark.parametrize("steps", [STEPS, STEPS[1:3], STEPS[3:]], ids=["all", "dba+qe", "krr"])
def test_index_search_gives_the_neighbours_of_the_evaluation_path(steps):
    """RetrievalIndex.search(postprocess=...) ranks the index rows as postprocessed_retrieve
    does on the same embeddings (the evaluation's path), and leaves the index as it was."""
    vectors, labels = clusters(120, seed=1)
    queries, query_labels = clusters(10, seed=2)
    train, _ = clusters(150, seed=3)
    index = RetrievalIndex(vectors.clone(), [f"img{i}.jpg" for i in range(120)], labels)
    got = index.search(
        queries, 5, query_paths=[f"q{i}" for i in range(10)], postprocess=steps, train=train
    )
    want = pp.postprocessed_retrieve(
        queries, query_labels, vectors, labels, steps=steps, train=train, min_k=5
    )
    assert want.r_max <= 25  # both searches as deep: a re-ranked shortlist of 25
    torch.testing.assert_close(got.indices, want.indices[:, :5], rtol=0, atol=0)
    torch.testing.assert_close(got.distances, want.distances[:, :5], rtol=0, atol=0)
    assert got.reference_paths[int(got.indices[0, 0])] == f"img{int(want.indices[0, 0])}.jpg"
    assert got.label(int(got.reference_labels[got.indices[0, 0]])) == labels[want.indices[0, 0]]
    assert got.metric == "squared_euclidean"
    assert torch.equal(index.vectors, vectors)
    plain = index.search(queries, 5)
    assert not torch.equal(plain.indices, got.indices)


def test_index_search_with_post_processing_leaves_out_the_excluded_rows():
    vectors, labels = clusters(60, seed=4)
    index = RetrievalIndex(vectors, [str(i) for i in range(60)], labels)
    rows = [3, 17, 40]
    got = index.search(vectors[rows], 4, exclude=rows, postprocess=["qe", "k_reciprocal:k1=5"])
    wider = index.search(vectors[rows], 5, postprocess=["qe", "k_reciprocal:k1=5"])
    for i, row in enumerate(rows):
        kept = [j for j in wider.indices[i].tolist() if j != row][:4]
        assert got.indices[i].tolist() == kept
    with pytest.raises(ConfigError, match="needs the training embeddings"):
        index.search(vectors[rows], 4, postprocess=["pca_whiten"])


def test_steps_are_registered_components_with_typed_options():
    assert pp.POSTPROCESSORS.names() == ["dba", "k_reciprocal", "pca_whiten", "qe"]
    assert pp.POSTPROCESSORS.get("k_reciprocal") is pp.KReciprocalReranking
    forms = (
        ["qe:k=3,alpha=2.0"],
        [{"name": "qe", "k": 3, "alpha": 2.0}],
        [{"qe": {"k": 3, "alpha": 2.0}}],
    )
    assert {pp.build_steps(form) for form in forms} == {(pp.QueryExpansion(k=3, alpha=2.0),)}
    specs = pp.parse_steps(STEPS)
    assert specs[-1] == {"name": "k_reciprocal", "k1": 6, "k2": 3, "lambda": 0.4, "shortlist": 25}
    assert pp.build_steps(specs) == pp.build_steps(STEPS)
    cases = [
        ("qe:k=0", r"evaluation.postprocess.qe.k: must be >= 1, got 0"),
        ({"dba": {"alpha": -1.0}}, r"evaluation.postprocess.dba.alpha: must be >= 0.0, got -1.0"),
        (
            {"qe": {"alpha": "high"}},
            r"evaluation.postprocess.qe.alpha: expected a number, got 'high'",
        ),
        ("pca_whiten:dim=0", r"evaluation.postprocess.pca_whiten.dim: must be >= 1, got 0"),
        ({"name": "k_reciprocal", "lam": 0.2}, r"unknown option\(s\) \['lam'\]"),
        ({"name": "k_reciprocal", "k2": True}, r"k_reciprocal.k2: expected an integer, got True"),
    ]
    for spec, message in cases:
        with pytest.raises(ConfigError, match=message):
            pp.build_steps([spec])
    with pytest.raises(ConfigError, match=r"k_reciprocal.lambda: must be in \[0, 1\], got 1.5"):
        pp.KReciprocalReranking(lam=1.5)
    with pytest.raises(
        ConfigError, match=r"--postprocess: unknown post-processing step 'qex'.*'qe'"
    ):
        pp.build_steps(["qex"], "--postprocess")
