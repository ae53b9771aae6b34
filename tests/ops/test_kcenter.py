import itertools

import torch

from gspdml.ops.kcenter import covering_radius, greedy_k_center


def test_farthest_first_order_and_initial_centers():
    pts = torch.tensor([[0.0], [1.0], [10.0], [4.0], [6.0]])
    # 0 first, then 10 (farthest from 0); 4 and 6 then tie at distance 4 and the lower index wins
    assert greedy_k_center(pts, 3).tolist() == [0, 2, 3]
    # an initial centre at 10 makes 0 the farthest point; then 4 and 6 tie again
    order = greedy_k_center(pts, 2, initial_centers=torch.tensor([[10.0]]))
    assert order.tolist() == [0, 3]


def test_pool_equal_to_k_returns_the_whole_pool():
    pts = torch.randn(7, 3)
    assert sorted(greedy_k_center(pts, 7, initial_centers=torch.randn(2, 3)).tolist()) == list(
        range(7)
    )


def test_two_approximation_against_brute_force():
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        pts = torch.rand(9, 2, generator=gen)
        for k in (1, 2, 3, 4):
            greedy = covering_radius(pts, pts[greedy_k_center(pts, k, first=trial % 9)])
            best = min(
                covering_radius(pts, pts[list(c)]) for c in itertools.combinations(range(9), k)
            )
            assert greedy <= 2 * best + 1e-6
