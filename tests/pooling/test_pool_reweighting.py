"""Feature re-weighting poolings (CroW, DeLF, CBAM, GSoP, HOW/T-SMK) against slow references
written from the papers' equations, in float64."""

import math

import pytest
import torch
import torch.nn.functional as F

from gspdml.pooling import build_pooling


def built(spec, channels, seed=0):
    torch.manual_seed(seed)
    return build_pooling(spec, in_channels=channels).double().eval()


def test_crow_matches_the_paper_formulas():
    x = torch.randn(2, 5, 3, 4, dtype=torch.float64)
    out = built("crow", 5)(x)
    for i in range(2):
        X = x[i].clamp_min(0)  # post-ReLU features
        aggregated = X.sum(dim=0)
        S = (
            (aggregated / math.sqrt((aggregated**2).sum())).clamp_min(1e-12).sqrt()
        )  # a = b = 2; floor keeps d/dS finite
        Q = torch.tensor([(X[c] > 0).double().mean() for c in range(5)], dtype=torch.float64)
        omega = torch.log((Q.sum() + 1e-6) / (Q + 1e-6))
        expected = torch.stack([omega[c] * (S * X[c]).sum() for c in range(5)])
        torch.testing.assert_close(out.vector[i], expected)
        torch.testing.assert_close(out.weights[i], S)


def test_crow_refuses_negative_features_without_rectification():
    with pytest.raises(ValueError, match="non-negative"):
        built({"crow": {"rectify": False}}, 5)(torch.randn(1, 5, 2, 2, dtype=torch.float64))


def test_delf_is_the_softplus_attended_mean():
    pool = built({"delf": {"hidden": 7}}, 4)
    x = torch.randn(2, 4, 3, 3, dtype=torch.float64)
    out = pool(x)
    W1, b1 = pool.score[0].weight.detach(), pool.score[0].bias.detach()
    w2, b2 = pool.score[2].weight.detach()[0], pool.score[2].bias.detach()[0]
    for i in range(2):
        feats = [x[i, :, r, s] for r in range(3) for s in range(3)]
        alpha = [F.softplus(w2 @ torch.relu(W1 @ f + b1) + b2) for f in feats]
        expected = sum(a * f for a, f in zip(alpha, feats)) / 9
        torch.testing.assert_close(out.vector[i].detach(), expected)
        torch.testing.assert_close(out.weights[i].detach().flatten(), torch.stack(alpha))


def test_cbam_matches_channel_then_spatial_attention():
    pool = built({"cbam": {"reduction": 2, "kernel_size": 3}}, 4)
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64)
    with torch.no_grad():
        out = pool(x)
        mlp = lambda v: pool.mlp(v)  # noqa: E731  (the shared MLP, Woo et al. Eq. 2)
        q = torch.sigmoid(mlp(x.mean(dim=(2, 3))) + mlp(x.amax(dim=(2, 3))))
        V = x * q[:, :, None, None]
        kernel, bias = pool.spatial.weight[0], pool.spatial.bias[0]
        padded = F.pad(torch.stack([V.mean(1), V.amax(1)], dim=1), (1, 1, 1, 1))
        a = torch.empty(2, 5, 5, dtype=torch.float64)
        for r in range(5):
            for s in range(5):
                a[:, r, s] = torch.sigmoid(
                    (padded[:, :, r : r + 3, s : s + 3] * kernel).sum(dim=(1, 2, 3)) + bias
                )
    torch.testing.assert_close(out.weights, a)
    torch.testing.assert_close(out.vector, (V * a[:, None]).mean(dim=(2, 3)))


def test_gsop_channel_weights_come_from_the_covariance():
    pool = built({"gsop": {"attention_dim": 3}}, 4)
    x = torch.randn(2, 4, 3, 3, dtype=torch.float64)
    with torch.no_grad():
        out = pool(x).vector
        for i in range(2):
            feats = x[i].flatten(1).T  # [n, C]
            bn = pool.bn
            Y = torch.relu(
                (feats @ pool.reduce.weight.T - bn.running_mean)
                / torch.sqrt(bn.running_var + bn.eps)
                * bn.weight
                + bn.bias
            )  # [n, c']
            centred = Y - Y.mean(dim=0)
            cov = centred.T @ centred / 9
            rows = torch.stack(
                [
                    pool.row_conv.weight[4 * r + j, 0] @ cov[r] + pool.row_conv.bias[4 * r + j]
                    for r in range(3)
                    for j in range(4)
                ]
            )
            q = torch.sigmoid(pool.expand(rows))
            torch.testing.assert_close(out[i], q * feats.mean(dim=0))


def test_how_is_the_norm_weighted_sum_of_smoothed_projected_features():
    pool = built({"t_smk": {"dim": 3}}, 4)
    x = torch.randn(2, 4, 4, 5, dtype=torch.float64)
    with torch.no_grad():
        out = pool(x)
        W, b = pool.fc.weight[:, :, 0, 0], pool.fc.bias
        for i in range(2):
            z = torch.zeros(3, dtype=torch.float64)
            norms = torch.empty(4, 5, dtype=torch.float64)
            for r in range(4):
                for s in range(5):
                    window = x[i, :, max(r - 1, 0) : r + 2, max(s - 1, 0) : s + 2]
                    smoothed = window.mean(dim=(1, 2))  # padding not counted
                    norms[r, s] = x[i, :, r, s].norm()
                    z += norms[r, s] * (W @ smoothed + b)
            torch.testing.assert_close(out.vector[i], z / z.norm())
            torch.testing.assert_close(out.weights[i], norms / norms.sum())
    assert built({"how": {"dim": 3}}, 4).out_channels() == 3


def test_crow_gradient_is_finite_at_an_all_zero_location():
    from gspdml.pooling import POOLINGS

    pool = POOLINGS.build("crow", in_channels=4)
    x = torch.rand(2, 4, 3, 3)
    x[:, :, 0, 0] = 0.0  # a location whose rectified features are all zero
    x.requires_grad_(True)
    pool(x).vector.sum().backward()
    assert torch.isfinite(x.grad).all()
