"""The exact kNN engine on CUDA returns what it returns on the CPU, bit for bit: the same
neighbours under the pinned tie rule (distance, then index) and the same float64 distances
(the re-ranking sums in a fixed order on every device), for every candidate dtype and block size."""

import pytest
import torch

from gspdml.evaluation import knn, retrieval_metrics
from tests.helpers.cuda import CUDA
from tests.helpers.knn_reference import brute_force

pytestmark = CUDA


def tied_points(n, dim, seed):
    """Points on a coarse integer grid (many exactly equal distances) with duplicated rows."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, (n, dim), generator=generator).float()
    x[n // 2 : n // 2 + 6] = x[0]
    return x


@pytest.mark.parametrize("leave_one_out", [True, False])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("budget", [2**28, 20_000])
def test_cuda_search_equals_the_cpu_search_and_the_brute_force(leave_one_out, precision, budget):
    q = tied_points(700, 16, 0)
    r = None if leave_one_out else tied_points(900, 16, 1)
    d_cpu, i_cpu = knn(q, r, 12, memory_budget=budget, precision=precision)
    d_cuda, i_cuda = knn(
        q.cuda(), None if r is None else r.cuda(), 12, memory_budget=budget, precision=precision
    )
    assert d_cuda.device.type == i_cuda.device.type == "cuda"
    assert torch.equal(i_cuda.cpu(), i_cpu) and torch.equal(d_cuda.cpu(), d_cpu)
    d_ref, i_ref = brute_force(q, r, 12)
    assert torch.equal(i_cpu, i_ref) and torch.equal(d_cpu, d_ref)


def test_cpu_tensors_searched_on_cuda_give_the_cpu_metrics():
    generator = torch.Generator().manual_seed(2)
    labels = torch.arange(200).repeat_interleave(5)
    x = torch.nn.functional.normalize(
        torch.randn(200, 32, generator=generator)[labels]
        + 0.3 * torch.randn(1000, 32, generator=generator),
        dim=1,
    )
    assert retrieval_metrics(x, labels, device="cuda") == retrieval_metrics(x, labels)
