"""Positivity law of mixed MS embeddings (Psomas thesis Eqs. 2.16-2.23)."""

import pytest
import torch
from scipy import stats

from gspdml.losses.metrix_positivity import positive_probability, positivity_threshold
from gspdml.losses.multi_similarity import MultiSimilarity as LabelledMultiSimilarity


def _dloss_ds(loss, s, lam):
    """Autograd derivative of the implemented mixed MS loss w.r.t. s(a, v), one mixed embedding."""
    s = torch.tensor(s, dtype=torch.float64, requires_grad=True)
    anchor = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    v = torch.stack([s, torch.sqrt(1 - s * s)])[None]
    value = loss.labelled(
        anchor, v, torch.tensor([0]), torch.tensor([0]), torch.tensor([lam], dtype=torch.float64)
    )
    return float(torch.autograd.grad(value, s)[0])


def test_sign_of_the_mixed_ms_gradient_follows_eq_2_22():
    beta, gamma, m = 18.0, 75.0, 0.77
    loss = LabelledMultiSimilarity(alpha=beta, beta=gamma, base=m)
    rng = torch.Generator().manual_seed(0)
    lams = torch.rand(400, generator=rng, dtype=torch.float64) * 0.98 + 0.01
    sims = torch.rand(400, generator=rng, dtype=torch.float64) * 1.98 - 0.99
    agree = 0
    for lam, s in zip(lams.tolist(), sims.tolist()):
        agree += (_dloss_ds(loss, s, lam) <= 0) == (
            s <= float(positivity_threshold(lam, beta, gamma, m))
        )
    assert agree == 400
    assert float(positivity_threshold(0.5, beta, gamma, m)) == pytest.approx(m)


@pytest.mark.parametrize("lam", [0.2, 0.5, 0.8])
def test_positive_probability_is_the_cdf_at_the_threshold(lam):
    torch.manual_seed(1)
    sims = torch.distributions.Normal(0.75, 0.05).sample((40000,))
    expected = stats.norm.cdf((float(positivity_threshold(lam)) - 0.75) / 0.05)
    assert positive_probability(sims, lam) == pytest.approx(expected, abs=0.01)
