"""The training-event half of CCP (Gürbüz thesis Algorithm 1 and §3.2.4).

The loss half, :class:`gspdml.losses.ccp.CCP`, holds the proxies and the options; this
controller runs the projection problems around it::

    grad theta += lambda (theta - theta*)           proximal gradient of (lambda/2)||theta - theta*||^2
                                                    (sign corrected: Algorithm 1 prints λ(θ* − θ))
    after `patience` validation rounds without improvement of `metric` (§3.2.4):
        theta* <- best (or last) weights,  proxies <- greedy k-center over a fresh pool (Algorithm 2)

The trainer attaches one to every loss module that declares ``controller = "ccp"``
(:func:`gspdml.training.parts.find_callbacks`). The model's parameters get the proximal gradient
(the proxies do not); the proxies' optimiser state is dropped at each re-initialisation.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import nn
from torch.utils.data import Subset

from gspdml.errors import ConfigError, TrainingError
from gspdml.losses.base import MetricLoss
from gspdml.losses.ccp import CCP
from gspdml.losses.ccp_selection import sample_pool
from gspdml.training.callbacks import Callback


class CCPController(Callback):
    """Runs the projection problems of one :class:`~gspdml.losses.ccp.CCP` loss (module
    docstring); ``anchor`` is ``theta*``, ``best``/``bad`` the best value and the rounds since."""

    def __init__(self, ccp: MetricLoss):
        if not isinstance(ccp, CCP):
            raise ConfigError(
                "loss", f"{type(ccp).__name__} declares the ccp controller but is no CCP loss"
            )
        self.ccp = ccp
        self.reset()

    def reset(self) -> None:
        self.initialised, self.lambda_active = False, False
        self.anchor: Optional[dict[str, torch.Tensor]] = None
        self.best_params: Optional[dict[str, torch.Tensor]] = None
        self.best_proxies: Optional[torch.Tensor] = None
        self.best, self.bad, self.problems_finished = float("-inf"), 0, 0

    # ------------------------------------------------------------------ hooks
    def on_train_start(self, trainer: Any) -> None:
        if self.initialised:  # resumed run: proxies and state come from the checkpoint
            return
        ccp = self.ccp
        self.anchor = snapshot_params(trainer.model)
        self.lambda_active = ccp.regularize_first
        self.reinitialize_proxies(trainer, None, ccp.pool_size if ccp.init == "kcenter" else ccp.k)
        self.initialised = True

    def on_after_backward(self, trainer: Any) -> None:
        """Add ``lambda (theta - theta*)``, the gradient of ``(lambda/2)||theta - theta*||^2``."""
        if not self.lambda_active or self.ccp.prox_lambda == 0 or self.anchor is None:
            return
        for name, param in trainer.model.named_parameters():
            if param.grad is not None and name in self.anchor:
                param.grad.add_(
                    param.detach() - self.anchor[name].to(param), alpha=self.ccp.prox_lambda
                )

    def on_evaluation(self, trainer: Any, metrics: dict[str, float]) -> None:
        metric = self.ccp.metric
        if metric not in metrics:
            raise TrainingError(
                f"CCP monitors '{metric}' but the evaluation returned {sorted(metrics)}"
            )
        value = float(metrics[metric])
        if value > self.best:
            self.best, self.bad = value, 0
            self.best_params = snapshot_params(trainer.model)
            self.best_proxies = self.ccp.proxies.detach().clone()
        else:
            self.bad += 1
        if self.bad >= self.ccp.patience:
            self.next_problem(trainer)

    # ------------------------------------------------------------ projections
    def next_problem(self, trainer: Any) -> None:
        """End the current projection problem: new ``theta*``, proximal term on, new proxies."""
        if self.ccp.snapshot == "best" and self.best_params is not None:
            anchor, old = self.best_params, self.best_proxies
        else:
            anchor, old = snapshot_params(trainer.model), self.ccp.proxies.detach().clone()
        self.anchor, self.lambda_active = anchor, True
        self.reinitialize_proxies(trainer, old, self.ccp.pool_size)
        self.best, self.bad, self.best_params, self.best_proxies = float("-inf"), 0, None, None
        self.problems_finished += 1

    def reinitialize_proxies(
        self, trainer: Any, old_proxies: Optional[torch.Tensor], pool_size: int
    ) -> None:
        """Algorithm 2: embed ``pool_size`` random training samples per class, let the loss pick
        ``K`` per class relative to ``old_proxies``, and reset the proxies' optimiser state."""
        ccp, dataset = self.ccp, trainer.train_dataset
        indices = sample_pool(dataset.labels, ccp.num_classes, pool_size)
        embeddings, _ = trainer.embed(Subset(dataset, indices.reshape(-1).tolist()))
        pool = torch.as_tensor(embeddings).reshape(ccp.num_classes, pool_size, -1)
        ccp.set_proxies_from_pool(pool, old_proxies)
        trainer.optimizer.state.pop(ccp.proxies, None)

    # ----------------------------------------------------------------- resume
    def callback_state(self) -> dict[str, torch.Tensor]:
        """A flat ``{name: tensor}`` dict (safetensors-compatible)."""
        state = {
            "initialised": torch.tensor(self.initialised),
            "lambda_active": torch.tensor(self.lambda_active),
            "best": torch.tensor(self.best, dtype=torch.float64),
            "bad": torch.tensor(self.bad),
            "problems_finished": torch.tensor(self.problems_finished),
        }
        for prefix, params in (("anchor.", self.anchor), ("best_params.", self.best_params)):
            state.update({prefix + k: v for k, v in (params or {}).items()})
        if self.best_proxies is not None:
            state["best_proxies"] = self.best_proxies
        return state

    def load_callback_state(self, state: dict[str, Any]) -> None:
        self.reset()
        self.initialised = bool(state["initialised"])
        self.lambda_active = bool(state["lambda_active"])
        self.best, self.bad = float(state["best"]), int(state["bad"])
        self.problems_finished = int(state["problems_finished"])
        for attr, prefix in (("anchor", "anchor."), ("best_params", "best_params.")):
            params = {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}
            setattr(self, attr, {k: torch.as_tensor(v) for k, v in params.items()} or None)
        if "best_proxies" in state:
            self.best_proxies = torch.as_tensor(state["best_proxies"]).to(self.ccp.proxies)


def snapshot_params(model: nn.Module) -> dict[str, torch.Tensor]:
    """Detached copies of the model's parameters, by name (``theta*`` and best-round snapshots)."""
    return {name: p.detach().clone() for name, p in model.named_parameters()}
