"""Optimiser groups built from the model and every loss, and a reduce-on-plateau schedule.

Every trainable parameter lands in exactly one group: ``backbone``, ``head`` and ``pooling`` of
the embedder with the config's ``optimizer.lr_multipliers`` (the parameters of a model without
these parts in one ``model`` group at the base rate), and the parameters of each loss
with the ``lr_multiplier`` the loss declares (e.g. proxies at x100). Nobody can forget the proxies.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn

from gspdml.models.embedder import Embedder
from gspdml.models.freezable import Freezable
from gspdml.settings.sections import LrMultipliers, OptimizerConfig, RunConfig


def embedder_parts(multipliers: LrMultipliers) -> dict[str, float]:
    """The embedder's parts and the ``lr_multipliers`` that apply to them (the global
    projection is a head)."""
    return {
        "backbone": multipliers.backbone,
        "head": multipliers.head,
        "pooling": multipliers.pooling,
        "projection": multipliers.head,
    }


def _declared_parts(model: nn.Module) -> dict[str, nn.Module]:
    """The parts a model declares: an :class:`Embedder`'s four, a :class:`Freezable`'s backbone."""
    if isinstance(model, Embedder):
        return {
            "backbone": model.backbone,
            "head": model.head,
            "pooling": model.pooling,
            "projection": model.projection,
        }
    return {"backbone": model.backbone} if isinstance(model, Freezable) else {}


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
    model: nn.Module, loss: nn.Module, multipliers: LrMultipliers, lr: float
) -> list[dict[str, Any]]:
    """Groups with ``name``, ``params``, ``lr`` and ``initial_lr`` (= base lr x multiplier)."""
    groups: list[dict[str, Any]] = []
    parts = _declared_parts(model)
    for part, mult in embedder_parts(multipliers).items():
        module = parts.get(part)  # a user's model may have none of these parts
        params = [p for p in module.parameters() if p.requires_grad] if module is not None else []
        if params:
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
    groups = parameter_groups(model, loss, cfg.lr_multipliers, cfg.lr)
    lr, decay = cfg.lr, cfg.weight_decay
    if cfg.name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum, weight_decay=decay)
    if cfg.name == "radam":
        return torch.optim.RAdam(
            groups,
            lr=lr,
            betas=cfg.betas,
            eps=cfg.eps,
            weight_decay=decay,
            decoupled_weight_decay=True,
        )
    cls = torch.optim.AdamW if cfg.name == "adamw" else torch.optim.Adam
    return cls(groups, lr=lr, betas=cfg.betas, eps=cfg.eps, weight_decay=decay)


def with_initial_lr(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """``optimizer``, each group with the ``initial_lr`` a schedule scales: a group without one
    (an optimiser built outside :func:`build_optimizer`) starts from its ``lr``, as torch's
    schedulers set it."""
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
    return optimizer


class PlateauSchedule:
    """Reduce-on-plateau for a metric where higher is better, by one of two conventions.

    ``convention="torch"`` is ``torch.optim.lr_scheduler.ReduceLROnPlateau(mode="max",
    threshold_mode="rel", cooldown=0)`` (what ProxyNCA++'s ``train.py`` runs): a round improves
    when ``metric > best * (1 + threshold)`` (torch's default ``threshold`` 1e-4), and the rate
    drops when *more than* ``patience`` rounds in a row did not improve; each group's rate becomes
    ``max(lr * factor, min_lr_g)`` and changes only when it falls by more than 1e-8 (torch's
    ``eps``). ``convention="keras"`` is ``tf.keras.callbacks.ReduceLROnPlateau(mode="max",
    cooldown=0)`` (the GSP and CCP authors' TF framework): a round improves when ``metric > best +
    threshold`` (keras' ``min_delta``), and the rate drops at the ``patience``-th round in a row
    without improvement. After a drop the count starts again (both).

    The floor ``min_lr`` is of the base learning rate ``base_lr``: group ``g`` stops at
    ``min_lr * initial_lr_g / base_lr``, so the groups keep their multipliers (with ``min_lr`` 0,
    as ProxyNCA++, torch's floor exactly). ``drops`` lists the training steps at which a rate
    dropped. ``tests/training/test_plateau_schedule.py`` checks both conventions against torch's
    scheduler and a transcription of keras' rule.
    """

    EPS = 1e-8  #: torch's ReduceLROnPlateau eps: smaller changes of a rate are skipped

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        base_lr: float,
        factor: float = 0.5,
        patience: int = 4,
        min_lr: float = 1e-6,
        convention: str = "keras",
        threshold: float = 0.0,
    ):
        self.optimizer, self.base_lr = with_initial_lr(optimizer), base_lr
        self.factor, self.patience, self.min_lr = factor, patience, min_lr
        self.convention, self.threshold = convention, threshold
        self.best, self.bad_rounds = float("-inf"), 0
        self.drops: list[int] = []  # training steps at which the rate was reduced

    def improves(self, metric: float) -> bool:
        if self.convention == "torch":
            return metric > self.best * (1.0 + self.threshold)
        return metric > self.best + self.threshold

    def step(self, metric: float, at_step: int = 0) -> None:
        if self.improves(metric):
            self.best, self.bad_rounds = metric, 0
            return
        self.bad_rounds += 1
        limit = self.patience + 1 if self.convention == "torch" else self.patience
        if self.bad_rounds < limit:
            return
        self.bad_rounds = 0
        changed = False
        for group in self.optimizer.param_groups:
            floor = self.min_lr * group["initial_lr"] / self.base_lr
            new = max(group["lr"] * self.factor, floor)
            if group["lr"] - new > (self.EPS if self.convention == "torch" else 0.0):
                group["lr"], changed = new, True
        if changed:
            self.drops.append(int(at_step))

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "bad_rounds": self.bad_rounds, "drops": list(self.drops)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The counters (the rates are the optimiser's state); a checkpoint of an earlier
        gspdml also holds its ``scale``, which the restored optimiser groups already carry."""
        self.best, self.bad_rounds = float(state["best"]), int(state["bad_rounds"])
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
        self.optimizer, self.factor = with_initial_lr(optimizer), float(factor)
        self.every, self.milestones = every, sorted(int(m) for m in milestones or ())

    def apply(self, step: int) -> None:
        reached = step // self.every if self.every else sum(1 for m in self.milestones if step >= m)
        scale = self.factor**reached
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"] * scale


@dataclass
class Schedules:
    """The learning-rate schedules of a run: reduce-on-plateau after validation rounds, a step
    decay after training steps (``schedule`` section: at most one of them)."""

    plateau: Optional[PlateauSchedule] = None
    step_decay: Optional[StepDecay] = None


def build_schedules(config: RunConfig, optimizer: torch.optim.Optimizer) -> Schedules:
    """The schedules of the ``schedule`` section over ``optimizer`` (their base rate
    ``optimizer.lr``)."""
    plateau, decay, base_lr = (
        config.schedule.plateau,
        config.schedule.step_decay,
        config.optimizer.lr,
    )
    return Schedules(
        PlateauSchedule(
            optimizer,
            base_lr,
            plateau.factor,
            plateau.patience,
            plateau.min_lr,
            plateau.convention,
            plateau.threshold,
        )
        if plateau
        else None,
        StepDecay(optimizer, decay.factor, decay.every, list(decay.milestones or ()))
        if decay
        else None,
    )
