"""The exact search is exact at any magnitude of the embeddings: its float32 (or bfloat16)
candidate and re-ranking passes work on the vectors scaled by a power of two to a unit radius,
so their products neither underflow (embeddings near 0: a dead or collapsed model that is not
L2-normalised) nor overflow (embeddings of norm 1e20), which the rounding bounds of the
certificate do not cover. Before, every row of a search of embeddings of norm 1e-25 was wrong,
and some rows at norm 1e20, each certified as exact."""

from __future__ import annotations

import pytest
import torch

from gspdml.evaluation import knn
from gspdml.evaluation.metrics import retrieval_metrics
from tests.helpers.knn_reference import brute_force


def _vectors(n: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g, dtype=torch.float64)
    x[7] = x[3]  # a duplicate
    return x.to(dtype)


@pytest.mark.numerics
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("power", [-90, -70, 66, 100])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("leave_one_out", [True, False])
def test_a_power_of_two_scale_moves_no_neighbour(dtype, power, precision, leave_one_out):
    """Scaling every vector by 2^power scales every squared distance by exactly 4^power and
    moves no neighbour: the search of the scaled vectors is that of the unscaled ones, which
    is the brute-force float64 sort by (distance, index)."""
    q = _vectors(120, 0, dtype)
    r = None if leave_one_out else _vectors(90, 1, dtype)
    d_ref, i_ref = brute_force(q, r, 6)
    d_unit, i_unit = knn(q, r, 6, precision=precision)
    assert torch.equal(i_unit, i_ref)
    torch.testing.assert_close(d_unit, d_ref, rtol=1e-12, atol=0.0)
    scale = 2.0**power
    d, i = knn(q * scale, None if r is None else r * scale, 6, precision=precision)
    assert torch.equal(i, i_ref)
    assert torch.equal(d, d_unit * scale**2)


@pytest.mark.numerics
@pytest.mark.parametrize("magnitude", [1e-25, 1e20])
def test_retrieval_metrics_of_tiny_and_huge_embeddings_equal_those_of_unit_ones(magnitude):
    """The metrics of a search do not depend on the unit the embeddings are in (here not a power
    of two: the float32 vectors are the float64 ones rounded, so the reference is their brute
    force)."""
    x = (_vectors(150, 2, torch.float64) * magnitude).float()
    labels = [i % 9 for i in range(150)]
    _, i_ref = brute_force(x, None, 149)
    rel = torch.tensor(labels)[i_ref] == torch.tensor(labels)[:, None]
    r = rel.sum(1)
    within = torch.arange(149) < r[:, None]
    precision = rel.cumsum(1).double() / torch.arange(1, 150, dtype=torch.float64)
    map_at_r = ((rel & within) * precision).sum(1) / r
    got = retrieval_metrics(x, labels, metrics=("map_at_r", "precision_at_1"))
    assert got["map_at_r"] == pytest.approx(float(map_at_r.double().mean()), abs=1e-12)
    assert got["precision_at_1"] == pytest.approx(float(rel[:, 0].double().mean()), abs=1e-12)
