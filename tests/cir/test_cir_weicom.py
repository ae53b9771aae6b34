"""WeiCom: per-query CDF normalisation and λ-weighted fusion (Eq. 5.2) against scipy and by hand."""

import numpy as np
import pytest
import torch
from scipy.stats import norm

from gspdml.cir.baselines import baseline_scores
from gspdml.cir.weicom import cdf_normalize, default_lambda, weicom_fuse, weicom_scores
from gspdml.errors import ConfigError


def test_cdf_normalisation_by_hand():
    # mean 1, unbiased std 1 -> z = (-1, 0, 1)
    got = cdf_normalize(torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64))
    np.testing.assert_allclose(
        got.numpy(), [[0.15865525393145707, 0.5, 0.8413447460685429]], atol=1e-12
    )
    biased = cdf_normalize(torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64), unbiased=False)
    np.testing.assert_allclose(
        biased.numpy(), [norm.cdf([-np.sqrt(1.5), 0, np.sqrt(1.5)])], atol=1e-12
    )
    assert cdf_normalize(torch.full((1, 4), 0.3)).tolist() == [[0.5] * 4]  # constant row, no NaN


def test_weicom_matches_scipy_on_the_reference_example():
    # as in github.com/billpsomas/rscir: seed 0, q, t ~ normalize(randn(16)), DB = normalize(randn(50, 16)), λ = 0.5
    torch.manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(1, 16, dtype=torch.float64), dim=-1)
    t = torch.nn.functional.normalize(torch.randn(1, 16, dtype=torch.float64), dim=-1)
    db = torch.nn.functional.normalize(torch.randn(50, 16, dtype=torch.float64), dim=-1)
    s_img, s_txt = (db @ q[0]).numpy(), (db @ t[0]).numpy()
    for lam in (0.0, 0.3, 0.5, 0.6, 1.0):
        want = lam * norm.cdf((s_txt - s_txt.mean()) / s_txt.std(ddof=1)) + (1 - lam) * norm.cdf(
            (s_img - s_img.mean()) / s_img.std(ddof=1)
        )
        np.testing.assert_allclose(weicom_scores(q, t, db, lam)[0].numpy(), want, atol=1e-12)
    # λ = 0 ranks as image-only, λ = 1 as text-only (Φ is monotone, Psomas thesis §5.3.3)
    assert torch.equal(
        weicom_scores(q, t, db, 0.0).argsort(), baseline_scores("image", q, t, db).argsort()
    )
    assert torch.equal(
        weicom_scores(q, t, db, 1.0).argsort(), baseline_scores("text", q, t, db).argsort()
    )


def test_normalisation_is_per_query():
    scores = torch.tensor([[0.0, 1.0, 2.0], [10.0, 30.0, 20.0]], dtype=torch.float64)
    got = cdf_normalize(scores)
    np.testing.assert_allclose(got[1].numpy(), norm.cdf([-1.0, 1.0, 0.0]), atol=1e-12)
    fused = weicom_fuse(scores, scores.flip(1), lam=0.25)
    np.testing.assert_allclose(
        fused.numpy(), (0.25 * cdf_normalize(scores.flip(1)) + 0.75 * got).numpy()
    )


def test_lambda_defaults_and_errors():
    assert default_lambda("RemoteCLIP-ViT-L-14") == 0.6
    assert default_lambda("ViT-L-14 openai CLIP") == 0.3
    assert default_lambda("siglip") == 0.5
    with pytest.raises(ConfigError, match="lambda: must be in \\[0, 1\\]"):
        weicom_fuse(torch.zeros(1, 3), torch.zeros(1, 3), lam=1.5)
    with pytest.raises(ConfigError, match="at least 2"):
        cdf_normalize(torch.zeros(1, 1))
