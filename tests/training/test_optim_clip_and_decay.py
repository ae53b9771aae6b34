"""Gradient clipping (norm, then value; network only), the step decay and RAdam's first step, by
hand."""

import pytest
import torch
from torch import nn

from gspdml.config import OptimizerConfig, load_config
from gspdml.errors import ConfigError
from gspdml.losses import ModuleLoss
from gspdml.training.optim import StepDecay, build_optimizer, clip_gradients


def model_with_gradient(values):
    model = nn.Linear(len(values), 1, bias=False)
    model.weight.grad = torch.tensor([values])
    return model


def test_clip_norm_then_value_by_hand():
    model = model_with_gradient([3.0, 4.0])  # norm 5
    clip_gradients(model, max_norm=1.0, max_value=None)
    torch.testing.assert_close(model.weight.grad, torch.tensor([[0.6, 0.8]]))
    model = model_with_gradient([3.0, 4.0])
    clip_gradients(model, max_norm=1.0, max_value=0.7)  # (0.6, 0.8) -> (0.6, 0.7)
    torch.testing.assert_close(model.weight.grad, torch.tensor([[0.6, 0.7]]))
    model = model_with_gradient([30.0, -4.0])
    clip_gradients(model, max_norm=None, max_value=10.0)  # ProxyNCA++: value 10 only
    torch.testing.assert_close(model.weight.grad, torch.tensor([[10.0, -4.0]]))


def test_loss_parameters_are_not_clipped():
    model, proxies = model_with_gradient([30.0]), nn.Parameter(torch.zeros(1))
    proxies.grad = torch.tensor([30.0])
    clip_gradients(model, max_norm=10.0, max_value=10.0)
    assert model.weight.grad.item() == pytest.approx(10.0) and proxies.grad.item() == 30.0


def test_step_decay_by_hand():
    param = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([{"params": [param], "lr": 2.0, "initial_lr": 2.0}], lr=2.0)
    decay = StepDecay(optimizer, every=10, factor=0.5)
    for step, lr in ((0, 2.0), (9, 2.0), (10, 1.0), (25, 0.5), (30, 0.25)):
        decay.apply(step)
        assert optimizer.param_groups[0]["lr"] == lr
    milestones = StepDecay(optimizer, milestones=[12, 5], factor=0.1)  # ProxyNCA++ trainval
    for step, lr in ((4, 2.0), (5, 0.2), (11, 0.2), (12, 0.02), (40, 0.02)):
        milestones.apply(step)
        assert optimizer.param_groups[0]["lr"] == pytest.approx(lr)


@pytest.mark.parametrize(
    "schedule, field",
    [
        ({"step_decay": {"every": 0, "factor": 0.5}}, "schedule.step_decay.every"),
        ({"step_decay": {"every": 10}}, "schedule.step_decay"),
        ({"step_decay": {"milestones": [0, 3], "factor": 0.1}}, "schedule.step_decay.milestones"),
        (
            {"step_decay": {"every": 10, "factor": 0.5}, "plateau": {"factor": 0.5}},
            "schedule.step_decay",
        ),
    ],
)
def test_bad_step_decay_is_named(schedule, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config({"schedule": schedule})


def test_bad_clip_value_is_named():
    with pytest.raises(ConfigError, match=r"optimizer\.grad_clip_value"):
        load_config({"optimizer": {"grad_clip_value": -1}})


def test_radam_first_step_is_the_unadapted_momentum_step_by_hand():
    """RAdam (LIBC's optimiser) while the variance is not tractable (rho_t <= 5, the first steps)
    steps by the bias-corrected first moment alone: theta_1 = theta_0 - lr (g + wd theta_0);
    Adam would step by about lr sign(g)."""
    model = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, -2.0]]))
    cfg = OptimizerConfig(name="radam", lr=0.1, weight_decay=0.01, betas=(0.9, 0.999))
    optimizer = build_optimizer(cfg, model, ModuleLoss(nn.Identity()))
    assert isinstance(optimizer, torch.optim.RAdam)
    model.weight.grad = torch.tensor([[0.5, 3.0]])
    optimizer.step()
    expected = torch.tensor([[1.0, -2.0]]) - 0.1 * (
        torch.tensor([[0.5, 3.0]]) + 0.01 * torch.tensor([[1.0, -2.0]])
    )
    torch.testing.assert_close(model.weight.detach(), expected)
