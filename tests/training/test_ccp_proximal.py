"""The proximal term of CCP: lambda (theta - theta*) added to the network gradients (Gürbüz thesis
Algorithm 1, sign corrected)."""

import torch
from torch import nn

from gspdml.losses import build_loss
from gspdml.training.ccp_controller import CCPController


class _Trainer:
    def __init__(self, model):
        self.model = model


def _controller(**kwargs):
    spec = {"name": "ccp", "base": "c2", "proxies_per_class": 2, "pool_size": 3, **kwargs}
    return CCPController(build_loss(spec, embedding_dim=3, num_classes=2))


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3)).double()


def test_proximal_gradient_matches_autograd_of_squared_distance():
    model, lam = _model(), 0.37
    anchor = {n: p.detach() + torch.randn_like(p) for n, p in model.named_parameters()}
    ctl = _controller(prox_lambda=lam)
    ctl.anchor, ctl.lambda_active = anchor, True
    base_grads = {n: torch.randn_like(p) for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        p.grad = base_grads[n].clone()
    ctl.on_after_backward(_Trainer(model))

    # independent reference: autograd of (lambda/2) ||theta - theta*||^2 in float64
    params = dict(model.named_parameters())
    reg = sum((params[n] - anchor[n]).pow(2).sum() for n in params) * (lam / 2)
    expected = torch.autograd.grad(reg, list(params.values()))
    for (n, p), g in zip(params.items(), expected):
        torch.testing.assert_close(p.grad, base_grads[n] + g)
        # the sign points from theta* to theta: a descent step moves theta towards theta*
        step = p.detach() - 1e-3 * (p.grad - base_grads[n])
        assert (step - anchor[n]).norm() < (p.detach() - anchor[n]).norm()


def test_no_proximal_term_in_first_problem_by_default_and_never_on_proxies():
    model = _model()
    ctl = _controller()
    ctl.anchor = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    ctl.lambda_active = ctl.ccp.regularize_first  # what on_train_start sets
    ctl.ccp.proxies.grad = torch.ones_like(ctl.ccp.proxies)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    ctl.on_after_backward(_Trainer(model))
    assert all(torch.count_nonzero(p.grad) == 0 for p in model.parameters())
    ctl.lambda_active = True
    ctl.on_after_backward(_Trainer(model))
    assert all(torch.count_nonzero(p.grad) > 0 for p in model.parameters())
    assert torch.equal(ctl.ccp.proxies.grad, torch.ones_like(ctl.ccp.proxies))
