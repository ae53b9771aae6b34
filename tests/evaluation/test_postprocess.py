"""Post-processing against slow loops written from the papers' equations."""

import math

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation import postprocess as pp
from gspdml.evaluation.k_reciprocal import k_reciprocal_rerank
from gspdml.evaluation.metrics import metrics_from_results


def unit_clusters(n, dim=8, classes=6, noise=0.5, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    x = rng.normal(size=(classes, dim))[labels] + noise * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), labels


def order(dist, exclude=None):
    """Indices sorted by (distance, index), ``exclude`` left out."""
    return [j for j in sorted(range(len(dist)), key=lambda j: (dist[j], j)) if j != exclude]


def sq(a, b):
    return float(((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2).sum())


def slow_alpha_expand(x, db, k, alpha, loo):
    out = []
    for i, v in enumerate(np.asarray(x, np.float64)):
        dist = [sq(v, y) for y in db]
        acc = v.copy()
        for j in order(dist, i if loo else None)[:k]:
            acc += max(float(v @ db[j]), 0.0) ** alpha * np.asarray(db[j], np.float64)
        out.append(acc / np.linalg.norm(acc))
    return np.array(out)


def test_alpha_expansion_matches_the_equation():
    x, _ = unit_clusters(60)
    q, _ = unit_clusters(9, seed=1)
    db = torch.from_numpy(x)
    got = pp.alpha_expand(db, db, 3, 3.0, leave_one_out=True)
    np.testing.assert_allclose(
        got.numpy(), slow_alpha_expand(x, x.astype(np.float64), 3, 3.0, True), atol=1e-6
    )
    got = pp.alpha_expand(torch.from_numpy(q), db, 4, 0.0, leave_one_out=False)
    np.testing.assert_allclose(
        got.numpy(), slow_alpha_expand(q, x.astype(np.float64), 4, 0.0, False), atol=1e-6
    )


def test_pca_whitening_matches_numpy_eigendecomposition():
    train, _ = unit_clusters(200, dim=6)
    test, _ = unit_clusters(30, dim=6, seed=3)
    mean = train.astype(np.float64).mean(0)
    values, vectors = np.linalg.eig(np.cov(train.T.astype(np.float64), bias=True))
    top = np.argsort(-values.real)[:4]
    projection = vectors.real[:, top] / np.sqrt(values.real[top] + 1e-6 * values.real.max())
    expected = (test - mean) @ projection
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    got = pp.PCAWhitening(4).fit(train=train)(test).numpy()
    # eigenvectors are defined up to sign: compare the sign-free Gram matrices
    np.testing.assert_allclose(got @ got.T, expected @ expected.T, atol=1e-5)
    white = pp.PCAWhitening().fit(train=train)
    centred = (torch.from_numpy(train).double() - white.mean) @ white.projection.T
    np.testing.assert_allclose((centred.T @ centred / len(train)).numpy(), np.eye(6), atol=1e-4)


def slow_k_reciprocal(items, probes, candidates, k1, k2, lam, db_offset=0):
    """Zhong et al. CVPR 2017, eq. 4-12, with python sets; ``items`` are all points, ``probes``
    their positions, ``candidates`` database rows (database = items[db_offset:])."""
    n = len(items)
    dist = [[sq(items[a], items[b]) for b in range(n)] for a in range(n)]

    def N(a, k):
        return [a] + order(dist[a], a)[:k]

    def R(a, k):
        return {g for g in N(a, k) if a in N(g, k)}

    half = round(k1 / 2)
    V = []
    for a in range(n):
        star = set(R(a, k1))
        for q in R(a, k1):
            rq = R(q, half)
            if len(R(a, k1) & rq) >= 2 / 3 * len(rq):
                star |= rq
        V.append({g: math.exp(-dist[a][g]) for g in star})
    W = []
    for a in range(n):
        near = N(a, k2 - 1)
        acc = {}
        for g in near:
            for j, value in V[g].items():
                acc[j] = acc.get(j, 0.0) + value / len(near)
        W.append(acc)
    out_d, out_i = [], []
    for p, cands in zip(probes, candidates):
        scored = []
        for c in cands:
            g = c + db_offset
            keys = set(W[p]) | set(W[g])
            low = sum(min(W[p].get(j, 0.0), W[g].get(j, 0.0)) for j in keys)
            high = sum(max(W[p].get(j, 0.0), W[g].get(j, 0.0)) for j in keys)
            scored.append(((1 - lam) * (1 - low / high) + lam * dist[p][g], c))
        scored.sort()
        out_d.append([s for s, _ in scored])
        out_i.append([c for _, c in scored])
    return np.array(out_d), np.array(out_i)


@pytest.mark.parametrize("loo", [True, False])
def test_k_reciprocal_matches_the_papers_equations(loo):
    db, _ = unit_clusters(40)
    q, _ = unit_clusters(7, seed=2)
    query = torch.from_numpy(db if loo else q)
    cands = torch.stack(
        [
            torch.randperm(40, generator=torch.Generator().manual_seed(i))[:12]
            for i in range(len(query))
        ]
    )
    got_d, got_i = k_reciprocal_rerank(
        query, torch.from_numpy(db), cands, k1=5, k2=3, lam=0.3, leave_one_out=loo
    )
    items = db if loo else np.concatenate([db, q])
    probes = range(40) if loo else range(40, 47)
    want_d, want_i = slow_k_reciprocal(
        items.astype(np.float64), list(probes), cands.numpy(), 5, 3, 0.3
    )
    np.testing.assert_allclose(got_d.numpy(), want_d, atol=1e-9)
    np.testing.assert_array_equal(got_i.numpy(), want_i)


@pytest.mark.parametrize("loo", [True, False])
def test_k_reciprocal_matches_the_papers_equations_among_ties(loo):
    """Points of the lattice {0,1,2}^4, duplicates among them: many equal distances, so every
    set of eq. 4-6 and the k2 items of eq. 9 are decided by the tie rule (distance, then
    database row, each item itself first); the 2/3 condition of eq. 6 is met with equality."""
    rng = np.random.default_rng(7)
    db = rng.integers(0, 3, size=(45, 4)).astype(np.float32)
    q = np.concatenate([db[:3], rng.integers(0, 3, size=(5, 4))]).astype(np.float32)
    query = torch.from_numpy(db if loo else q)
    cands = torch.stack(
        [torch.randperm(44, generator=torch.Generator().manual_seed(i))[:15] for i in range(8)]
        if not loo  # leave-one-out: never the query's own row
        else [
            (i + 1 + torch.randperm(44, generator=torch.Generator().manual_seed(i))[:15]) % 45
            for i in range(45)
        ]
    )
    for k1, k2 in ((6, 3), (20, 6)):
        got_d, got_i = k_reciprocal_rerank(
            query, torch.from_numpy(db), cands, k1=k1, k2=k2, lam=0.3, leave_one_out=loo
        )
        items = db if loo else np.concatenate([db, q])
        probes = range(45) if loo else range(45, 53)
        want_d, want_i = slow_k_reciprocal(
            items.astype(np.float64), list(probes), cands.numpy(), k1, k2, 0.3
        )
        np.testing.assert_allclose(got_d.numpy(), want_d, atol=1e-9)
        np.testing.assert_array_equal(got_i.numpy(), want_i)


def test_pipeline_leave_one_out_with_query_expansion_excludes_the_query_row():
    x, labels = unit_clusters(80)
    res = pp.postprocessed_retrieve(x, labels, steps=["qe:k=2,alpha=3.0"])
    expanded = slow_alpha_expand(x, x.astype(np.float64), 2, 3.0, True)
    for i in range(80):
        dist = [sq(expanded[i], y) for y in x]
        assert res.indices[i].tolist() == order(dist, i)[: res.k]
    assert res.excluded.tolist() == list(range(80))
    plain = pp.postprocessed_retrieve(x, labels)
    cut = ["map_at_r"]  # a search as deep as max R; the full mAP would need every reference
    assert (
        metrics_from_results(res, metrics=cut)["num_queries"]
        == metrics_from_results(plain, metrics=cut)["num_queries"]
        == 80
    )


def test_pipeline_query_gallery_with_every_step():
    db, db_labels = unit_clusters(90, seed=4)
    q, q_labels = unit_clusters(15, seed=5)
    train, _ = unit_clusters(120, seed=6)
    steps = [
        "pca_whiten:dim=6",
        {"name": "dba", "k": 2},
        "qe",
        {"name": "k_reciprocal", "k1": 6, "k2": 3, "shortlist": 20},
    ]
    res = pp.postprocessed_retrieve(q, q_labels, db, db_labels, steps=steps, train=train)
    white = pp.PCAWhitening(6).fit(train=train)
    wq, wdb = white(torch.from_numpy(q)).numpy(), white(torch.from_numpy(db)).numpy()
    wdb = slow_alpha_expand(wdb, wdb.astype(np.float64), 2, 3.0, True)
    wq = slow_alpha_expand(wq, wdb, 2, 3.0, False)
    assert res.k == max(
        20, int(np.bincount(db_labels).max())
    )  # the shortlist, or max R_i when larger
    shortlist = np.array([order([sq(v, y) for y in wdb])[: res.k] for v in wq])
    want_d, want_i = slow_k_reciprocal(
        np.concatenate([wdb, wq]), list(range(90, 105)), shortlist, 6, 3, 0.3
    )
    np.testing.assert_array_equal(res.indices.numpy(), want_i)
    np.testing.assert_allclose(res.distances.numpy(), want_d, atol=1e-5)


def test_bad_steps_are_named():
    with pytest.raises(ConfigError, match="unknown post-processing step 'qex'"):
        pp.parse_steps(["qex"])
    with pytest.raises(
        ConfigError, match=r"evaluation.postprocess.qe.*unknown option\(s\) \['beta'\]"
    ):
        pp.parse_steps([{"name": "qe", "beta": 1}])
    with pytest.raises(ConfigError, match=r"k_reciprocal.lambda.*must be in \[0, 1\], got 2"):
        pp.parse_steps(["k_reciprocal:lambda=2"])
    with pytest.raises(ConfigError, match="given twice"):
        pp.parse_steps(["qe", "qe"])
    with pytest.raises(ConfigError, match="needs the training embeddings"):
        pp.postprocessed_retrieve(*unit_clusters(20), steps=["pca_whiten"])
    assert [s["name"] for s in pp.parse_steps(["k_reciprocal", "qe", "dba"])] == [
        "dba",
        "qe",
        "k_reciprocal",
    ]


def test_config_section_is_validated():
    from gspdml.config import load_config

    assert (
        load_config("demo-gsp", ["evaluation.postprocess=[qe, {name: k_reciprocal, k1: 10}]"])[
            "evaluation"
        ]["postprocess"][1]["k1"]
        == 10
    )
    assert load_config("demo-gsp").evaluation.postprocess == ()
    with pytest.raises(
        ConfigError, match="evaluation.postprocess.k_reciprocal.k1.*expected an integer, got 'many'"
    ):
        load_config("demo-gsp", ["evaluation.postprocess=[{name: k_reciprocal, k1: many}]"])


def test_steps_are_objects_built_from_the_spec_list():
    """build_steps makes fit/apply objects from evaluation.postprocess's spec list, in the order
    of application; objects and specs give the same retrieval."""
    steps = pp.build_steps(
        ["k_reciprocal:lambda=0.5,shortlist=20", "qe:k=3", {"name": "pca_whiten", "dim": 5}]
    )
    assert steps == (
        pp.PCAWhitening(5),
        pp.QueryExpansion(k=3, alpha=3.0),
        pp.KReciprocalReranking(k1=20, k2=6, lam=0.5, shortlist=20),
    )
    assert [s.name for s in steps] == ["pca_whiten", "qe", "k_reciprocal"]
    assert steps[0].learns_on_training and not steps[1].learns_on_training
    db, db_labels = unit_clusters(70, seed=4)
    q, q_labels = unit_clusters(12, seed=5)
    train, _ = unit_clusters(90, seed=6)
    objects = (
        pp.KReciprocalReranking(k1=5, k2=2, shortlist=15),
        pp.DatabaseAugmentation(k=2, alpha=1.0),
        pp.PCAWhitening(6),
    )
    by_objects = pp.postprocessed_retrieve(q, q_labels, db, db_labels, steps=objects, train=train)
    by_specs = pp.postprocessed_retrieve(
        q,
        q_labels,
        db,
        db_labels,
        train=train,
        steps=["dba:k=2,alpha=1.0", "pca_whiten:dim=6", "k_reciprocal:k1=5,k2=2,shortlist=15"],
    )
    assert torch.equal(by_objects.indices, by_specs.indices)
    assert torch.equal(by_objects.distances, by_specs.distances)
    with pytest.raises(ConfigError, match=r"step\(s\) \['qe'\] given twice"):
        pp.build_steps([pp.QueryExpansion(), "qe"])
    with pytest.raises(ConfigError, match="apply a fitted whitening"):
        pp.PCAWhitening(3)(torch.from_numpy(q))
