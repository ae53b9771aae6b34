"""CCP's proxy re-initialisation and proximal term beside the authors' released TensorFlow code.

The CCP authors' framework (``yetigurbuz/ccp-dml`` at 204b22c, MIT licence; the callback of
the projection problems, ``greedyKCenter`` and the gradient transformers, vendored unchanged
under ``vendor/ccp_tf/``) runs in the TensorFlow interpreter of ``GSPDML_TF_PYTHON``
(``scripts/tf_parity_env.sh``), driven by ``ccp_tf_driver.py``: its
``AlternatingProjectionCallback._updateRepresentatives`` picks ``K`` proxies per class by greedy
k-center over a pool of ``b`` embeddings per class, away from the best proxies of the finished
problem (all zeros before the first one, as ``on_train_begin`` finds them), and its
``DistanceRegularizer`` adds the proximal gradient ``lambda (theta - theta*)``. Beside them
gspdml's preset ``ccp-cub-c2`` (K = 8, b = 12, lambda = 2e-4): ``CCP.set_proxies_from_pool`` and
``CCPController.on_after_backward``.

What it finds. A later problem: where both see the same vectors on the unit sphere (the pool
and the old proxies L2-normalised) the two pick the same pool points in the same order. What each
side embeds differs, and then so do the picks (asserted): the framework's pool is the raw output
of its embedding head and the old proxies enter as trained, unnormalised, while gspdml's pool is
the embedder's clip-normalised embedding (``model.normalize: clip``) and it compares the old
proxies after L2 normalisation, the space of its loss. The first problem: the framework's
all-zero centres are nearer to every pool point (``||x||``) than the points already picked
(about ``sqrt(2) ||x||`` apart in these dimensions), so its "k-center" takes the ``K`` pool
points of largest norm, largest first (asserted; on unit vectors, a tie that float32 rounding
breaks), where gspdml runs the farthest-first traversal from the first pool point (Gürbüz
thesis Algorithm 2 without old centres). Both rows are in ``docs/paper-vs-code.md`` ("CCP proxy
re-initialisation").

Tolerance: the picks are indices (exact); the proximal gradient is one float32 multiply-add on
each side, compared to 2 float32 roundings of its scale.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from gspdml.losses.base import build_loss
from gspdml.ops.normalize import clip_normalize
from gspdml.settings.schema import plain
from gspdml.training.ccp_controller import CCPController
from tests.parity import _step_harness as harness
from tests.parity import _tf_parity as tf_parity

DRIVER = Path(__file__).parent / "ccp_tf_driver.py"
pytestmark = tf_parity.marks("CCP")
CLASSES, DIM = 10, 128
CASES = ("unit-next", "embedded-first", "embedded-next")


def our_loss() -> nn.Module:
    """The CCP loss of the preset ``ccp-cub-c2`` over :data:`CLASSES` classes."""
    config = harness.preset("ccp-cub-c2", {"model": {"backbone": {"pretrained": False}}})
    assert config.model.normalize == "clip" and config.model.embedding_dim == DIM
    return build_loss(plain(config.loss), "loss", embedding_dim=DIM, num_classes=CLASSES)


def case_arrays(name: str, loss: nn.Module, seed: int) -> dict[str, np.ndarray]:
    """The TF side's inputs: a raw pool ``[b, C, d]`` (norms 0.5 to 3, as an embedding head's
    output), old proxies ``[K C, d]`` (norms 0.3 to 2, or zeros before the first problem), both
    L2-normalised in the ``unit`` cases; the proximal term's weight, anchor and gradient."""
    rs = np.random.RandomState(seed)
    k, b = loss.k, loss.pool_size

    def vectors(*shape: int, low: float, high: float) -> np.ndarray:
        direction = rs.randn(*shape, DIM)
        direction /= np.linalg.norm(direction, axis=-1, keepdims=True)
        scale = 1.0 if name.startswith("unit") else rs.uniform(low, high, (*shape, 1))
        return (direction * scale).astype(np.float32)

    pool = vectors(b, CLASSES, low=0.5, high=3.0)
    best = vectors(k * CLASSES, low=0.3, high=2.0)
    if name.endswith("first"):
        best = np.zeros_like(best)
    return {
        "pool": pool,
        "best": best,
        "k": np.int64(k),
        "weight": rs.randn(64, DIM).astype(np.float32),
        "anchor": rs.randn(64, DIM).astype(np.float32),
        "grad": (1e-3 * rs.randn(64, DIM)).astype(np.float32),
        "prox_lambda": np.float64(loss.prox_lambda),
    }


def picks(proxies: torch.Tensor, pool: torch.Tensor, k: int) -> list[list[int]]:
    """For each class, the pool index of each of its ``k`` proxies (rows ``k C + c``), in order."""
    per_class = proxies.double().reshape(k, CLASSES, DIM).transpose(0, 1)  # [C, K, d]
    return torch.cdist(per_class, pool.double()).argmin(dim=2).tolist()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    loss = our_loss()
    cases = {name: case_arrays(name, loss, seed) for seed, name in enumerate(CASES)}
    theirs = tf_parity.authors_run(DRIVER, tmp_path_factory.mktemp("ccp_tf"), cases)
    return {"loss": loss, "cases": cases, "theirs": theirs}


def our_picks(loss: nn.Module, arrays: dict[str, np.ndarray], name: str) -> list[list[int]]:
    """gspdml's picks on the case: its pool as its embedder gives it (clip-normalised)."""
    pool = clip_normalize(torch.as_tensor(arrays["pool"]).transpose(0, 1))  # [C, b, d]
    old = None if name.endswith("first") else torch.as_tensor(arrays["best"])
    loss.set_proxies_from_pool(pool, old)
    return picks(loss.proxies.detach(), pool, loss.k)


def test_later_problem_on_unit_vectors_picks_the_authors_proxies(runs):
    arrays, theirs = runs["cases"]["unit-next"], runs["theirs"]["unit-next"]
    pool = torch.as_tensor(arrays["pool"]).transpose(0, 1)
    expected = picks(torch.as_tensor(theirs["proxies"]), pool, runs["loss"].k)
    assert our_picks(runs["loss"], arrays, "unit-next") == expected


def test_later_problem_on_embedded_vectors_picks_other_proxies(runs):
    arrays, theirs = runs["cases"]["embedded-next"], runs["theirs"]["embedded-next"]
    pool = torch.as_tensor(arrays["pool"]).transpose(0, 1)
    theirs_picks = picks(torch.as_tensor(theirs["proxies"]), pool, runs["loss"].k)
    ours = our_picks(runs["loss"], arrays, "embedded-next")
    differing = sum(a != b for a, b in zip(ours, theirs_picks))
    assert differing > CLASSES // 2, (differing, ours, theirs_picks)


def test_first_problem_the_code_takes_the_largest_norms(runs):
    arrays, theirs = runs["cases"]["embedded-first"], runs["theirs"]["embedded-first"]
    pool = torch.as_tensor(arrays["pool"]).transpose(0, 1)
    k = runs["loss"].k
    largest = pool.norm(dim=2).argsort(dim=1, descending=True)[:, :k].tolist()
    assert picks(torch.as_tensor(theirs["proxies"]), pool, k) == largest
    # gspdml: the farthest-first traversal from each class's first pool point
    ours = our_picks(runs["loss"], arrays, "embedded-first")
    assert all(row[0] == 0 for row in ours) and ours != largest


def test_proximal_gradient_equals_the_distance_regularizer(runs):
    arrays, theirs = runs["cases"]["unit-next"], runs["theirs"]["unit-next"]
    controller = CCPController(runs["loss"])
    model = nn.Module()
    model.weight = nn.Parameter(torch.as_tensor(arrays["weight"]))
    model.weight.grad = torch.as_tensor(arrays["grad"]).clone()
    controller.anchor = {"weight": torch.as_tensor(arrays["anchor"])}
    controller.lambda_active = True
    controller.on_after_backward(SimpleNamespace(model=model))
    expected = torch.as_tensor(theirs["proximal_grad"])
    scale = float(expected.abs().max())
    tolerance = 2 * torch.finfo(torch.float32).eps * scale
    assert float((model.weight.grad - expected).abs().max()) <= tolerance
