"""SimPool's Table 3.12 options (Psomas thesis §3.4.4) against a slow reference: Algorithm 1 of
the thesis written here with loops over images, iterations, pooled vectors, heads and locations
(numpy, float64), reading the layer's parameters. The default layer is pinned by
test_pool_simpool.py."""

import math

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.pooling import build_pooling

D, P = 8, 12


def layernorm(v, weight, bias, eps=1e-6):
    return (v - v.mean()) / math.sqrt(v.var() + eps) * weight + bias


def pairwise(kind, key, query):
    if kind == "dot":
        return float(key @ query)
    if kind == "neg_sq_euclidean":
        return -float(((key - query) ** 2).sum())
    return float(key @ query / (np.linalg.norm(key) * np.linalg.norm(query)))


def kmeans(X, k, steps):
    p = len(X)
    centroids = [X[j * p // k].copy() for j in range(k)]
    for _ in range(steps):
        members = [[] for _ in range(k)]
        for x in X:
            distances = [np.sum((x - c) ** 2) for c in centroids]
            members[int(np.argmin(distances))].append(x)
        centroids = [np.mean(m, axis=0) if m else c for m, c in zip(members, centroids)]
    return centroids


def numpy_params(pool):
    """Per iteration the maps as numpy arrays (None where absent)."""

    def arrays(maps):
        out = {}
        for name in ("wq", "wk", "wv"):
            layer = getattr(maps, name)
            out[name] = None if layer is None else layer.weight.detach().numpy()
        for name in ("norm", "norm_q"):
            layer = getattr(maps, name)
            out[name] = (
                None
                if layer is None
                else (layer.weight.detach().numpy(), layer.bias.detach().numpy())
            )
        return out

    return [arrays(pool)] + [arrays(m) for m in pool.later_maps]


def reference(X, pool, options):
    """Algorithm 1 for one image ``X [p, d]`` (rows are locations) with the layer's options."""
    get = options.get
    k, heads = get("k", 1), get("heads", 1)
    gamma = get("gamma", 1.25)  # gamma: auto on tokens [B, p, d]
    linear, ln = set(get("linear", ("q", "k"))), set(get("layernorm", ("k", "v")))
    iterations, init = get("iterations", 1), get("init", "gap")
    p, d = X.shape
    if init == "gap":
        U = [X.mean(0)]
    elif init == "diag":
        w = [float(x @ x) for x in X]
        U = [sum(wi * x for wi, x in zip(w, X)) / sum(w)]
    elif init == "kmeans":
        U = kmeans(X, k, get("kmeans_steps", 10))
    else:
        U = list(pool.initial.detach().numpy())
    per_iteration = numpy_params(pool)
    e = d // heads
    for t in range(iterations):
        maps = per_iteration[t if len(per_iteration) > 1 else 0]
        normed = [layernorm(x, *maps["norm"]) for x in X] if maps["norm"] else list(X)
        keys = [normed[i] if "k" in ln else X[i] for i in range(p)]
        values = [normed[i] if "v" in ln else X[i] for i in range(p)]
        if maps["wk"] is not None:
            keys = [maps["wk"] @ v for v in keys]
        if maps["wv"] is not None:
            values = [maps["wv"] @ v for v in values]
        queries = []
        for u in U:
            q = layernorm(u, *maps["norm_q"]) if "q" in ln else u
            queries.append(maps["wq"] @ q if "q" in linear else q)
        low = min(float(v.min()) for v in values)
        shifted = [v - low + 1e-6 for v in values]
        Z = [np.zeros(d) for _ in range(k)]
        weights = np.zeros(p)
        for h in range(heads):
            c = slice(h * e, (h + 1) * e)
            S = np.array(
                [
                    [
                        pairwise(get("similarity", "dot"), keys[i][c], queries[j][c])
                        for j in range(k)
                    ]
                    for i in range(p)
                ]
            ) / math.sqrt(e)
            A = np.zeros((p, k))
            if get("attention", "softmax") == "softmax":
                for j in range(k):
                    A[:, j] = np.exp(S[:, j]) / np.exp(S[:, j]).sum()
            else:
                for i in range(p):
                    A[i] = np.exp(S[i]) / np.exp(S[i]).sum()
                for j in range(k):
                    A[:, j] /= A[:, j].sum()
            for j in range(k):
                if gamma is None:
                    Z[j][c] = sum(A[i, j] * values[i][c] for i in range(p))
                else:
                    Z[j][c] = sum(A[i, j] * shifted[i][c] ** gamma for i in range(p)) ** (1 / gamma)
            weights += A.sum(1) / (heads * k)
        U = Z
    if k == 1:
        return U[0], weights
    if get("combine", "max") == "max":
        return np.max(U, axis=0), weights
    return pool.project.weight.detach().numpy() @ np.concatenate(U), weights


def built(options, seed=0):
    torch.manual_seed(seed)
    pool = build_pooling({"simpool": options}, in_channels=D).double()
    with torch.no_grad():  # LayerNorm affine away from the identity, so that its use is checked
        for module in pool.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.3, 0.3)
    return pool


OPTIONS = [
    {"heads": 4},
    {"attention": "slot"},
    {"attention": "slot", "init": "kmeans", "k": 3},
    {"similarity": "neg_sq_euclidean"},
    {"similarity": "cosine", "gamma": 1.25},
    {"init": "diag"},
    {"init": "learned", "k": 2, "combine": "concat"},
    {"init": "kmeans", "k": 3, "combine": "max"},
    {"init": "kmeans", "k": 2, "combine": "concat", "kmeans_steps": 3},
    {"iterations": 3},
    {"iterations": 3, "share_iterations": False},
    {"linear": ["q", "k", "v"], "layernorm": ["q", "k", "v"]},
    {"linear": ["k"], "layernorm": ["v"], "gamma": None},
    {"linear": [], "layernorm": []},
    {"shared_qk": True},
    {
        "heads": 2,
        "iterations": 2,
        "share_iterations": False,
        "init": "kmeans",
        "k": 2,
        "combine": "concat",
        "similarity": "cosine",
        "attention": "slot",
        "layernorm": ["q", "k"],
        "gamma": 3.0,
    },
]


@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items())
)
def test_each_option_matches_the_loop_reference(options):
    pool = built(options)
    X = np.random.default_rng(1).standard_normal((2, P, D))
    with torch.no_grad():
        out = pool(torch.from_numpy(X))
    for b in range(2):
        vector, weights = reference(X[b], pool, options)
        np.testing.assert_allclose(out.vector[b].numpy(), vector, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out.weights[b].numpy(), weights, rtol=1e-9, atol=1e-14)
    torch.testing.assert_close(out.weights.sum(1), torch.ones(2, dtype=torch.float64))


def test_option_parameters_are_the_ones_the_ablation_counts():
    d = D
    count = lambda options: sum(p.numel() for p in built(options).parameters())  # noqa: E731
    default = count({})
    assert default == 2 * d * d + 2 * d  # W_Q, W_K and the LayerNorm affine
    assert count({"shared_qk": True}) == d * d + 2 * d  # "50% less parameters" of W_Q, W_K
    assert count({"iterations": 3}) == default
    assert count({"iterations": 3, "share_iterations": False}) == 3 * default
    assert count({"init": "learned", "k": 2}) == default + 2 * d
    assert count({"init": "kmeans", "k": 2, "combine": "concat"}) == default + 2 * d * d


def test_slot_attention_of_one_vector_and_one_kmeans_cluster_are_uniform_and_gap():
    X = torch.randn(2, D, 3, 4, dtype=torch.float64)
    slot = built({"attention": "slot"})(X)
    torch.testing.assert_close(slot.weights, torch.full((2, 3, 4), 1 / 12, dtype=torch.float64))
    gap, one_cluster = built({})(X), built({"init": "kmeans", "k": 1})(X)
    torch.testing.assert_close(one_cluster.vector, gap.vector)


@pytest.mark.parametrize(
    "options",
    [
        {"heads": 2, "attention": "slot", "init": "kmeans", "k": 2, "combine": "concat"},
        {"iterations": 2, "share_iterations": False, "similarity": "cosine", "init": "diag"},
    ],
)
def test_gradcheck_in_float64(options):
    pool = built(options)
    x = torch.randn(2, 6, D, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: pool(t).vector, (x,))


@pytest.mark.parametrize(
    "options, field",
    [
        ({"attention": "sigmoid"}, "attention"),
        ({"similarity": "l1"}, "similarity"),
        ({"init": "random"}, "init"),
        ({"combine": "mean", "k": 2, "init": "kmeans"}, "combine"),
        ({"heads": 3}, "heads"),
        ({"heads": 0}, "heads"),
        ({"k": 0}, "k"),
        ({"k": 2}, "init"),
        ({"iterations": 1.5}, "iterations"),
        ({"kmeans_steps": 0}, "kmeans_steps"),
        ({"linear": ["q", "x"]}, "linear"),
        ({"layernorm": ["k", "k"]}, "layernorm"),
        ({"shared_qk": True, "linear": ["q"]}, "shared_qk"),
    ],
)
def test_bad_options_name_the_field(options, field):
    with pytest.raises(ConfigError, match=f"model.pooling.{field}"):
        build_pooling({"simpool": options}, in_channels=D)


def test_more_pooled_vectors_than_locations_is_refused():
    pool = built({"init": "kmeans", "k": 5})
    with pytest.raises(ValueError, match="k=5 pooled vectors need at least k locations"):
        pool(torch.randn(1, D, 2, 2, dtype=torch.float64))
