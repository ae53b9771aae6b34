"""CCP: chance-constrained programming for DML (seed 004 chapter 3; gurbuz-thesis-spec §3).

Each projection problem (seed 004 Eq. 3.2.11, L618) is a proxy-based version of a pair loss
plus a proximal term towards the previous solution::

    theta^(k), rho* = argmin_{theta, rho}  (lambda/2) ||theta - theta*||^2 + (1/c) sum_i E_z[l(rho_i, z; theta)]

solved by stochastic gradients (Algorithm 1, L602-604, with the sign of the proximal gradient
corrected to ``lambda (theta - theta*)``, spec §9 A5). When validation MAP@R has not improved for
``patience`` rounds (L651) the problem is finished: ``theta*`` becomes the snapshot of that
problem and the proxies are re-initialised with pool samples chosen by greedy k-center
(Algorithm 2, :mod:`gspdml.losses.ccp_selection`), farthest from the converged proxies.

Trainer interface used (all via the :class:`~gspdml.training.callbacks.Callback` hooks):

* ``trainer.model``: the network; its parameters get the proximal gradient (the proxies,
  which live in this loss, do not).
* ``trainer.optimizer``: a ``torch.optim.Optimizer``; the state of the proxy tensor is dropped
  at each re-initialisation (fresh Adam moments and step count).
* ``trainer.train_dataset``: the training split; ``.labels`` (int64 array) and item access.
* ``trainer.embed(dataset) -> (embeddings [N, D], labels [N])``: embeds a dataset (here a
  ``torch.utils.data.Subset`` of the training split, with its training augmentation) in eval
  mode, in dataset order, and leaves the model's train/eval mode as it found it.

Hooks: ``on_train_start`` (initial proxies), ``on_after_backward`` (proximal gradient; the
gradients must be unscaled when AMP is used), ``on_evaluation`` (projection control),
``callback_state``/``load_callback_state`` (resume).
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Subset

from gspdml.errors import ConfigError, TrainingError
from gspdml.losses.base import LOSSES, MetricLoss, build_loss
from gspdml.losses.ccp_selection import sample_pool, select_proxies
from gspdml.losses.pairs import PairLoss
from gspdml.ops.normalize import clip_normalize
from gspdml.training.callbacks import Callback

SNAPSHOTS = ("best", "last")
NORMALIZATIONS = ("clip", "l2")
INITS = ("kcenter", "random")


@LOSSES.register("ccp")
class CCP(MetricLoss, Callback):
    """Wrap a pair loss (C1, C2, MS, triplet, ...) into CCP with ``K`` proxies per class.

    Loss of one batch (Eq. 3.2.11 without the proximal term, which acts on the gradients)::

        L = proxy_weight * l(proxies, batch)  +  batch_weight * l(batch, batch)

    where ``l(proxies, batch)`` is the base pair loss with the proxies as anchors and the batch
    as references (``proxy_as_anchor=True``, the thesis: "anchor samples being class proxies",
    L621) or the batch as anchors and the proxies as references (``False``, [CODE]). The
    in-batch term is not in the thesis; the authors' code uses ``batch_weight=0.1`` (spec A14).

    Args:
        base: spec of the pair loss (a :class:`~gspdml.losses.pairs.PairLoss`).
        proxies_per_class: ``K`` (CUB/Cars 8, SOP/In-Shop 4; L755).
        pool_size: ``b`` samples per class in the k-center pool (CUB/Cars 12, SOP/In-Shop 7).
            ``b == K`` is random re-initialisation.
        prox_lambda: ``lambda`` of the proximal term (2e-4, L755).
        patience: validation rounds without improvement that end a projection problem (3, L651).
        metric: the validation metric that is monitored (MAP@R, L651).
        regularize_first: apply the proximal term in the first problem, towards the initial
            weights (thesis Alg. 1); False = [CODE] (lambda = 0 until the first re-initialisation).
        snapshot: ``best`` ([CODE]): the best-validation weights and proxies of a finished
            problem become ``theta*`` and the old k-center centres; ``last``: the weights and
            proxies at the moment it ends (thesis Alg. 1, ``theta* <- theta, rho* <- rho``).
            Training always continues from the current weights.
        init: initial proxies; ``random`` (thesis: embeddings of ``K`` random samples per
            class) or ``kcenter`` ([CODE]: greedy k-center over a pool of ``b``, starting at
            the first pool point; the code's all-zero initial centres make the same choice
            when the embeddings are unit-norm).
        proxy_as_anchor, proxy_weight, batch_weight: see above.
        normalization: ``clip`` (default): embeddings and proxies enter the loss as
            ``v / max(1, ||v||)`` (thesis L649; the authors' ``lipschitz_cont: true`` in every CCP
            config); ``l2``: the base loss L2-normalises them, as it does on its own. Evaluation
            sees the same embeddings as the loss when the
            embedder clips too (``model.normalize: clip``, as the CCP presets set it).
    """

    nested = {"base": LOSSES}

    def __init__(
        self,
        base: Any,
        embedding_dim: int,
        num_classes: int,
        proxies_per_class: int = 8,
        pool_size: int = 12,
        prox_lambda: float = 2e-4,
        patience: int = 3,
        metric: str = "map_at_r",
        regularize_first: bool = False,
        snapshot: str = "best",
        init: str = "kcenter",
        proxy_as_anchor: bool = True,
        proxy_weight: float = 1.0,
        batch_weight: float = 0.0,
        normalization: str = "clip",
    ):
        super().__init__()
        _require(proxies_per_class >= 1, "proxies_per_class", f"must be >= 1, got {proxies_per_class}")
        _require(pool_size >= proxies_per_class, "pool_size", f"must be >= proxies_per_class ({proxies_per_class}), got {pool_size}")
        _require(prox_lambda >= 0, "prox_lambda", f"must be >= 0, got {prox_lambda}")
        _require(patience >= 1, "patience", f"must be >= 1, got {patience}")
        _require(snapshot in SNAPSHOTS, "snapshot", f"unknown value {snapshot!r}; allowed: {', '.join(SNAPSHOTS)}")
        _require(init in INITS, "init", f"unknown value {init!r}; allowed: {', '.join(INITS)}")
        _require(normalization in NORMALIZATIONS, "normalization",
                 f"unknown value {normalization!r}; allowed: {', '.join(NORMALIZATIONS)}")
        self.base = build_loss(base, "loss.base", embedding_dim=embedding_dim, num_classes=num_classes)
        _require(isinstance(self.base, PairLoss), "base", f"CCP needs a pair loss, got {type(self.base).__name__}")
        self.num_classes, self.k, self.pool_size = num_classes, proxies_per_class, pool_size
        self.prox_lambda, self.patience, self.metric = prox_lambda, patience, metric
        self.regularize_first, self.snapshot, self.init = regularize_first, snapshot, init
        self.proxy_as_anchor, self.proxy_weight, self.batch_weight = proxy_as_anchor, proxy_weight, batch_weight
        self.normalization = normalization
        if normalization == "clip":  # the pair loss measures the clipped vectors as they are
            self.base.normalize_inputs = False
        # k-major layout: row k * C + c is proxy k of class c
        self.proxies = nn.Parameter(torch.zeros(num_classes * proxies_per_class, embedding_dim))
        self.register_buffer("proxy_labels", torch.arange(num_classes).repeat(proxies_per_class), persistent=False)
        self._reset_state()

    # ------------------------------------------------------------------ loss
    def forward(self, embeddings, labels, output=None):
        proxies = self.proxies
        if self.normalization == "clip":
            embeddings, proxies = clip_normalize(embeddings), clip_normalize(proxies)
        if self.proxy_as_anchor:
            loss = self.base(proxies, self.proxy_labels, reference=embeddings, reference_labels=labels)
        else:
            loss = self.base(embeddings, labels, reference=proxies, reference_labels=self.proxy_labels)
        loss = self.proxy_weight * loss
        if self.batch_weight:
            loss = loss + self.batch_weight * self.base(embeddings, labels)
        return loss

    # ------------------------------------------------------------- callbacks
    def on_train_start(self, trainer) -> None:
        if self._initialised:  # resumed run: proxies and state come from the checkpoint
            return
        self._anchor = _snapshot_params(trainer.model)
        self._lambda_active = self.regularize_first
        pool = self.pool_size if self.init == "kcenter" else self.k
        self.reinitialize_proxies(trainer, None, pool)
        self._initialised = True

    def on_after_backward(self, trainer) -> None:
        """Add ``lambda (theta - theta*)``, the gradient of ``(lambda/2)||theta - theta*||^2``."""
        if not self._lambda_active or self.prox_lambda == 0 or self._anchor is None:
            return
        for name, param in trainer.model.named_parameters():
            if param.grad is not None and name in self._anchor:
                param.grad.add_(param.detach() - self._anchor[name].to(param), alpha=self.prox_lambda)

    def on_evaluation(self, trainer, metrics: dict[str, float]) -> None:
        if self.metric not in metrics:
            raise TrainingError(f"CCP monitors '{self.metric}' but the evaluation returned {sorted(metrics)}")
        value = float(metrics[self.metric])
        if value > self._best:
            self._best, self._bad = value, 0
            self._best_params = _snapshot_params(trainer.model)
            self._best_proxies = self.proxies.detach().clone()
        else:
            self._bad += 1
        if self._bad >= self.patience:
            self.next_problem(trainer)

    def next_problem(self, trainer) -> None:
        """End the current projection problem: new ``theta*``, proximal term on, new proxies."""
        if self.snapshot == "best" and self._best_params is not None:
            anchor, old = self._best_params, self._best_proxies
        else:
            anchor, old = _snapshot_params(trainer.model), self.proxies.detach().clone()
        self._anchor, self._lambda_active = anchor, True
        self.reinitialize_proxies(trainer, old, self.pool_size)
        self._best, self._bad, self._best_params, self._best_proxies = float("-inf"), 0, None, None
        self.problems_finished += 1

    def reinitialize_proxies(self, trainer, old_proxies: Optional[torch.Tensor], pool_size: int) -> None:
        """Algorithm 2: embed ``pool_size`` random training samples per class with the current
        network and pick ``K`` per class by greedy k-center relative to ``old_proxies``
        (``[C*K, D]``, k-major, compared after L2 normalisation, the space of the loss;
        spec A7). Resets the optimiser state of the proxies."""
        dataset = trainer.train_dataset
        indices = sample_pool(dataset.labels, self.num_classes, pool_size)
        embeddings, _ = trainer.embed(Subset(dataset, indices.reshape(-1).tolist()))
        pool = torch.as_tensor(embeddings).to(self.proxies).reshape(self.num_classes, pool_size, -1)
        old = None
        if old_proxies is not None:
            old = F.normalize(old_proxies.to(self.proxies), dim=1).reshape(self.k, self.num_classes, -1).transpose(0, 1)
        picks = select_proxies(pool, old, self.k).to(pool.device)
        chosen = pool[torch.arange(self.num_classes, device=pool.device)[:, None], picks]  # [C, K, D]
        with torch.no_grad():
            self.proxies.copy_(chosen.transpose(0, 1).reshape(-1, chosen.shape[-1]))
        trainer.optimizer.state.pop(self.proxies, None)

    # ---------------------------------------------------------------- resume
    def _reset_state(self) -> None:
        self._initialised, self._lambda_active = False, False
        self._anchor: Optional[dict[str, torch.Tensor]] = None
        self._best_params: Optional[dict[str, torch.Tensor]] = None
        self._best_proxies: Optional[torch.Tensor] = None
        self._best, self._bad, self.problems_finished = float("-inf"), 0, 0

    def callback_state(self) -> dict[str, torch.Tensor]:
        """A flat ``{name: tensor}`` dict (safetensors-compatible)."""
        state = {
            "initialised": torch.tensor(self._initialised),
            "lambda_active": torch.tensor(self._lambda_active),
            "best": torch.tensor(self._best, dtype=torch.float64),
            "bad": torch.tensor(self._bad),
            "problems_finished": torch.tensor(self.problems_finished),
        }
        for prefix, params in (("anchor.", self._anchor), ("best_params.", self._best_params)):
            state.update({prefix + k: v for k, v in (params or {}).items()})
        if self._best_proxies is not None:
            state["best_proxies"] = self._best_proxies
        return state

    def load_callback_state(self, state: dict[str, Any]) -> None:
        self._reset_state()
        self._initialised = bool(state["initialised"])
        self._lambda_active = bool(state["lambda_active"])
        self._best, self._bad = float(state["best"]), int(state["bad"])
        self.problems_finished = int(state["problems_finished"])
        for attr, prefix in (("_anchor", "anchor."), ("_best_params", "best_params.")):
            params = {k[len(prefix):]: torch.as_tensor(v) for k, v in state.items() if k.startswith(prefix)}
            setattr(self, attr, params or None)
        if "best_proxies" in state:
            self._best_proxies = torch.as_tensor(state["best_proxies"]).to(self.proxies)


def _snapshot_params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _require(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"loss.{field}", message)
