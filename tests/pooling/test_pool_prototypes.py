"""NetVLAD and OTP (prototype ensembles) against slow references; OT plan against POT."""

import numpy as np
import ot
import pytest
import torch
import torch.nn.functional as F

from gspdml.pooling import build_pooling
from gspdml.pooling.otp import sinkhorn_log


def test_netvlad_matches_a_loop_over_clusters_and_locations():
    torch.manual_seed(0)
    pool = build_pooling(
        {"netvlad": {"clusters": 3, "dim": 4, "alpha": 2.0}}, in_channels=6
    ).double()
    x = torch.randn(2, 6, 2, 3, dtype=torch.float64)
    out = pool(x).vector.detach()
    assert out.shape == (2, 12) and pool.out_channels() == 12
    P, W, b, c = (
        pool.project.weight.detach(),
        pool.assign.weight.detach(),
        pool.assign.bias.detach(),
        pool.centres.detach(),
    )
    for i in range(2):
        descriptors = [F.normalize(P @ x[i, :, r, s], dim=0) for r in range(2) for s in range(3)]
        blocks = []
        for k in range(3):
            v = torch.zeros(4, dtype=torch.float64)
            for f in descriptors:
                logits = W @ f + b
                v += torch.exp(logits[k]) / torch.exp(logits).sum() * (f - c[k])
            blocks.append(v / v.norm())
        torch.testing.assert_close(out[i], torch.cat(blocks))


def test_netvlad_large_setting_without_projection():
    pool = build_pooling({"netvlad": {"clusters": 64, "dim": None}}, in_channels=128)
    assert isinstance(pool.project, torch.nn.Identity) and pool.out_channels() == 64 * 128
    blocks = pool(torch.randn(2, 128, 8, 8)).vector.reshape(2, 64, 128)
    torch.testing.assert_close(blocks.norm(dim=-1), torch.ones(2, 64))  # intra-normalised


def test_sinkhorn_plan_matches_pot_and_has_the_marginals():
    cost = torch.rand(2, 9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    plan = sinkhorn_log(cost, eps=0.2, iters=500)
    for i in range(2):
        expected = ot.sinkhorn(
            np.full(9, 1 / 9),
            np.full(4, 1 / 4),
            cost[i].numpy(),
            reg=0.2,
            numItermax=10000,
            stopThr=1e-13,
        )
        np.testing.assert_allclose(plan[i].numpy(), expected, rtol=1e-6, atol=1e-10)
    torch.testing.assert_close(plan.sum(dim=2), torch.full((2, 9), 1 / 9, dtype=torch.float64))
    torch.testing.assert_close(plan.sum(dim=1), torch.full((2, 4), 1 / 4, dtype=torch.float64))


def test_otp_outputs_convex_combinations_of_projected_features():
    torch.manual_seed(0)
    pool = build_pooling(
        {"otp": {"prototypes": 4, "dim": 5, "eps": 0.5, "iters": 200}}, in_channels=6
    ).double()
    x = torch.randn(2, 6, 3, 3, dtype=torch.float64)
    with torch.no_grad():
        psi = pool.project(x.flatten(2).transpose(1, 2))
        plan = pool.transport_plan(psi)
        out = pool(x).vector.reshape(2, 4, 5)
        torch.testing.assert_close(plan.sum(dim=1), torch.full((2, 4), 1 / 4, dtype=torch.float64))
        mixing = 4 * plan  # columns sum to one
        for i in range(2):
            for j in range(4):
                expected = sum(mixing[i, t, j] * psi[i, t] for t in range(9))
                torch.testing.assert_close(out[i, j], expected)


def test_otp_small_eps_assigns_each_reference_its_nearest_features():
    """eps -> 0 approaches the exact OT plan (an LP), here checked with POT's emd solver."""
    torch.manual_seed(0)
    pool = build_pooling(
        {"otp": {"prototypes": 3, "dim": None, "eps": 0.01, "iters": 300}}, in_channels=4
    ).double()
    psi = torch.randn(1, 6, 4, dtype=torch.float64)
    with torch.no_grad():
        plan = pool.transport_plan(psi)[0].numpy()
        x, z = F.normalize(psi[0], dim=-1), F.normalize(pool.references.double(), dim=-1)
        cost = ((x[:, None] - z[None]) ** 2).sum(-1).numpy()
    exact = ot.emd(np.full(6, 1 / 6), np.full(3, 1 / 3), cost)
    assert abs((plan * cost).sum() - (exact * cost).sum()) < 0.02 * (1 / 6)


def test_invalid_sizes_are_config_errors():
    from gspdml.errors import ConfigError

    with pytest.raises(ConfigError, match="model.pooling.clusters"):
        build_pooling({"netvlad": {"clusters": 0}}, 8)
    with pytest.raises(ConfigError, match="model.pooling.eps"):
        build_pooling({"otp": {"eps": 0}}, 8)
