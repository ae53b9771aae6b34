"""The toy of the GSP paper Fig. 1 (Gürbüz thesis Fig. 5.2): a 10x10x3 map, half of it
green background, a red and a blue block, two prototypes (red, blue), under-estimated mu."""

import pytest
import torch

from gspdml.pooling.gsp.layer import prototype_costs
from gspdml.pooling.gsp.transport import partial_transport, partial_transport_lp


@pytest.fixture(scope="module")
def toy():
    g = torch.Generator().manual_seed(0)
    features = torch.zeros(10, 10, 3, dtype=torch.float64)
    features[..., 1] = 1.0  # green background
    features[:5, :5] = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)  # red block
    features[5:, 5:] = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)  # blue block
    features = features + 0.05 * torch.randn(10, 10, 3, generator=g, dtype=torch.float64)
    foreground = torch.zeros(100, dtype=torch.bool)
    foreground.view(10, 10)[:5, :5] = True
    foreground.view(10, 10)[5:, 5:] = True
    prototypes = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    return prototype_costs(prototypes, features.reshape(1, 100, 3).transpose(1, 2)), foreground


def weights(rho, mu):
    return ((1.0 / 100 - rho) / mu)[0]


def test_lp_with_true_mu_selects_the_foreground(toy):
    cost, fg = toy
    p = weights(partial_transport_lp(cost, 0.5)[0], 0.5)
    assert int((p[fg] > 0).sum()) == 50 and int((p[~fg] > 0).sum()) == 0


def test_lp_with_underestimated_mu_drops_informative_pixels(toy):
    cost, fg = toy
    p = weights(partial_transport_lp(cost, 0.2)[0], 0.2)
    assert int((p[fg] > 0).sum()) == 20  # 30 foreground pixels get weight 0
    assert int((p[~fg] > 0).sum()) == 0


@pytest.mark.parametrize("eps", [5.0, 10.0, 20.0])
def test_smoothed_solution_keeps_the_whole_foreground(toy, eps):
    cost, fg = toy
    p = weights(partial_transport(cost, 0.2, eps)[0], 0.2)
    assert float(p[fg].sum()) > 0.99  # foreground mass
    assert float(p[fg].min()) > 0.25 / 100  # every informative pixel is kept
    assert float(p[~fg].max()) < 0.02 / 100


def test_smoothing_extremes(toy):
    cost, fg = toy
    too_smooth = weights(partial_transport(cost, 0.2, 1.0)[0], 0.2)
    assert float(too_smooth[fg].sum()) < 0.8  # close to GAP: background keeps much weight
    nearly_lp = weights(partial_transport(cost, 0.2, 50.0)[0], 0.2)
    assert float(nearly_lp[fg].min()) < 0.05 / 100  # re-approaches the LP's hard selection
