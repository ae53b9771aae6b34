"""Optimiser groups built from the model and every loss, and a reduce-on-plateau schedule.

Every trainable parameter lands in exactly one group: ``backbone``, ``head`` and ``pooling`` of
the embedder with the config's ``optimizer.lr_multipliers`` (the parameters of a model without
these parts in one ``model`` group at the base rate), and the parameters of each loss
with the ``lr_multiplier`` the loss declares (e.g. proxies at x100). Nobody can forget the proxies.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional

import torch
from torch import nn

from gspdml.config import OptimizerConfig

#: embedder parts -> the lr_multipliers key that applies to them (the global projection is a head)
EMBEDDER_PARTS = {
    "backbone": "backbone",
    "head": "head",
    "pooling": "pooling",
    "projection": "head",
}


def _loss_parameters(
    module: nn.Module, inherited: float = 1.0
) -> Iterator[tuple[float, nn.Parameter]]:
    """(multiplier, parameter) for every parameter below ``module``; a submodule that declares
    ``lr_multiplier`` sets it for itself and its children, others inherit their parent's."""
    multiplier = float(getattr(module, "lr_multiplier", inherited))
    for param in module.parameters(recurse=False):
        if param.requires_grad:
            yield multiplier, param
    for child in module.children():
        yield from _loss_parameters(child, multiplier)


def parameter_groups(
    model: nn.Module, loss: nn.Module, multipliers: Mapping[str, float], lr: float
) -> list[dict[str, Any]]:
    """Groups with ``name``, ``params``, ``lr`` and ``initial_lr`` (= base lr x multiplier)."""
    groups: list[dict[str, Any]] = []
    for part, key in EMBEDDER_PARTS.items():
        module = getattr(model, part, None)
        params = [p for p in module.parameters() if p.requires_grad] if module is not None else []
        if params:
            mult = float(multipliers.get(key, 1.0))
            groups.append(
                {"name": part, "params": params, "lr": lr * mult, "initial_lr": lr * mult}
            )
    named = {id(p) for group in groups for p in group["params"]}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in named]
    if rest:  # a model without the embedder's parts (a user's): one group at the base rate
        groups.append({"name": "model", "params": rest, "lr": lr, "initial_lr": lr})
    by_multiplier: dict[float, list[nn.Parameter]] = {}
    for mult, param in _loss_parameters(loss):
        by_multiplier.setdefault(mult, []).append(param)
    for mult, params in sorted(by_multiplier.items()):
        groups.append(
            {"name": f"loss x{mult:g}", "params": params, "lr": lr * mult, "initial_lr": lr * mult}
        )
    _check_each_parameter_once(groups, model, loss)
    return groups


def _check_each_parameter_once(groups: list[dict[str, Any]], *modules: nn.Module) -> None:
    seen: set[int] = set()
    for group in groups:
        for param in group["params"]:
            if id(param) in seen:
                raise ValueError(
                    f"a parameter appears in two optimiser groups (second: {group['name']})"
                )
            seen.add(id(param))
    missing = [p for m in modules for p in m.parameters() if p.requires_grad and id(p) not in seen]
    if missing:
        raise ValueError(f"{len(missing)} trainable parameters are in no optimiser group")


def build_optimizer(
    cfg: OptimizerConfig, model: nn.Module, loss: nn.Module
) -> torch.optim.Optimizer:
    """Adam, AdamW, RAdam (Liu et al., ICLR 2020: rectified Adam, LIBC's optimiser) or SGD over
    :func:`parameter_groups` (``optimizer`` section of the config). RAdam's weight decay is
    decoupled, ``p <- p - lr wd p`` before the update, as in the RAdam that LIBC's release ships
    (``RAdam.py``; ``tests/parity/test_libc_step.py``), not Adam's L2 term in the gradient."""
    groups = parameter_groups(model, loss, dict(cfg.lr_multipliers), cfg.lr)
    common = {"lr": cfg.lr, "weight_decay": cfg.weight_decay}
    if cfg.name == "sgd":
        return torch.optim.SGD(groups, momentum=cfg.momentum, **common)
    if cfg.name == "radam":
        return torch.optim.RAdam(
            groups, betas=cfg.betas, eps=cfg.eps, decoupled_weight_decay=True, **common
        )
    cls = torch.optim.AdamW if cfg.name == "adamw" else torch.optim.Adam
    return cls(groups, betas=cfg.betas, eps=cfg.eps, **common)


class PlateauSchedule:
    """Multiply every group's learning rate by ``factor`` after ``patience`` evaluation rounds
    without improvement of the monitored metric (higher is better); the base learning rate
    ``base_lr`` never drops below ``min_lr`` (groups keep their multipliers)."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        base_lr: float,
        factor: float = 0.5,
        patience: int = 4,
        min_lr: float = 1e-6,
    ):
        self.optimizer, self.base_lr = optimizer, base_lr
        self.factor, self.patience, self.min_lr = factor, patience, min_lr
        self.scale, self.best, self.bad_rounds = 1.0, float("-inf"), 0
        self.drops: list[int] = []  # training steps at which the rate was reduced

    def step(self, metric: float, at_step: int = 0) -> None:
        if metric > self.best:
            self.best, self.bad_rounds = metric, 0
            return
        self.bad_rounds += 1
        if self.bad_rounds >= self.patience:
            self.scale = max(self.scale * self.factor, min(self.scale, self.min_lr / self.base_lr))
            self.bad_rounds = 0
            self.drops.append(int(at_step))
            for group in self.optimizer.param_groups:
                group["lr"] = group["initial_lr"] * self.scale

    def state_dict(self) -> dict:
        return {
            "scale": self.scale,
            "best": self.best,
            "bad_rounds": self.bad_rounds,
            "drops": list(self.drops),
        }

    def load_state_dict(self, state: Mapping) -> None:
        self.scale, self.best, self.bad_rounds = (
            float(state["scale"]),
            float(state["best"]),
            int(state["bad_rounds"]),
        )
        self.drops = [int(s) for s in state.get("drops", [])]


def clip_gradients(model: nn.Module, max_norm: Optional[float], max_value: Optional[float]) -> None:
    """Clip the network's gradients: first the global L2 norm to ``max_norm``, then each entry to
    ``[-max_value, max_value]`` (either may be ``None``). Loss parameters (proxies, class
    embeddings) are not clipped, as in ProxyNCA++'s ``clip_grad_value_(model.parameters(), 10)``;
    the GSP/CCP authors' TF configs set both limits to 10."""
    params = [p for p in model.parameters() if p.grad is not None]
    if max_norm:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
    if max_value:
        torch.nn.utils.clip_grad_value_(params, max_value)


class StepDecay:
    """``lr = initial_lr * factor ** k`` for every group, ``k`` the number of decay points reached:
    every ``every`` steps (``StepLR`` counted in training steps; Metrix decays by 0.1, 0.5 or 0.25
    every 10 epochs, Psomas thesis §2.4.1) or at the listed ``milestones`` (``MultiStepLR``; the
    ProxyNCA++ trainval stage repeats the train stage's plateau drops). A function of the step
    count alone, so a resumed run needs no state."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        factor: float,
        every: Optional[int] = None,
        milestones: Optional[list[int]] = None,
    ):
        self.optimizer, self.factor = optimizer, float(factor)
        self.every, self.milestones = every, sorted(int(m) for m in milestones or ())

    def apply(self, step: int) -> None:
        reached = step // self.every if self.every else sum(1 for m in self.milestones if step >= m)
        scale = self.factor**reached
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"] * scale
