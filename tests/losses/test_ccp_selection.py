"""CCP proxy selection (Gürbüz thesis Algorithm 2): the per-class pool and greedy k-center over it."""

import numpy as np
import pytest
import torch

from gspdml.losses.ccp_selection import sample_pool, select_proxies
from tests.helpers.kcenter_reference import kcenter_reference


def test_sample_pool_draws_from_the_right_class_without_replacement():
    labels = np.array([2, 0, 1, 0, 2, 2, 1, 0, 2, 1, 0, 1])
    torch.manual_seed(3)
    pool = sample_pool(labels, 3, 3)
    assert pool.shape == (3, 3)
    for c in range(3):
        assert (labels[pool[c].numpy()] == c).all() and len(set(pool[c].tolist())) == 3
    small = sample_pool(np.array([0, 0, 1]), 2, 4)  # class 1 has one image: padded by repetition
    assert (small[1] == 2).all() and set(small[0].tolist()) == {0, 1}
    with pytest.raises(ValueError, match="class 1"):
        sample_pool(np.array([0, 2]), 3, 1)


def test_select_proxies_is_greedy_k_center_from_old_proxies():
    g = torch.Generator().manual_seed(1)
    pool = torch.randn(4, 7, 3, generator=g, dtype=torch.float64)
    old = torch.randn(4, 3, 3, generator=g, dtype=torch.float64)
    old[:, :2] = pool[:, :2]  # two old proxies sit on pool points: those are never chosen
    picks = select_proxies(pool, old, 3)
    for c in range(4):
        assert picks[c].tolist() == kcenter_reference(pool[c], old[c], 3)
        assert not set(picks[c].tolist()) & {0, 1}


def test_pool_size_equal_to_k_takes_the_whole_random_pool():
    g = torch.Generator().manual_seed(2)
    pool, old = torch.randn(5, 4, 3, generator=g), torch.randn(5, 4, 3, generator=g)
    picks = select_proxies(pool, old, 4)
    assert all(sorted(p.tolist()) == [0, 1, 2, 3] for p in picks)
