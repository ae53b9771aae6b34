"""CCP: chance-constrained programming for DML (Gürbüz thesis chapter 3).

Each projection problem (Gürbüz thesis Eq. 3.2.11) is a proxy-based pair loss plus a proximal
term towards the previous solution::

    theta^(k), rho* = argmin_{theta, rho}  (lambda/2) ||theta - theta*||^2 + (1/c) sum_i E_z[l(rho_i, z; theta)]

solved by stochastic gradients (Algorithm 1, §3.2.3; its proximal gradient ``lambda (theta* -
theta)`` has the sign corrected). When validation MAP@R has not improved for ``patience`` rounds
(§3.2.4) the problem ends: ``theta*`` becomes its snapshot and the proxies are re-initialised
by greedy k-center over pool samples (Algorithm 2, :mod:`gspdml.losses.ccp_selection`).

This module is the loss half; the reactions to training events are
:class:`gspdml.training.ccp_controller.CCPController`, attached to every loss that declares
``controller = "ccp"``.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.losses.base import LOSSES, Output
from gspdml.losses.ccp_selection import select_proxies
from gspdml.losses.pairs import PairLoss
from gspdml.losses.wrapper import LossWrapper
from gspdml.ops.normalize import clip_normalize
from gspdml.typecheck import AT_LEAST_1, NON_NEGATIVE, OneOf, Refusal

SNAPSHOTS = ("best", "last")
NORMALIZATIONS = ("clip", "l2")
INITS = ("kcenter", "random")


@LOSSES.register("ccp")
class CCP(LossWrapper):
    """Wrap a pair loss (C1, C2, MS, triplet, ...) into CCP with ``K`` proxies per class.

    Loss of one batch (Eq. 3.2.11 without the proximal term, which acts on the gradients)::

        L = proxy_weight * l(proxies, batch)  +  batch_weight * l(batch, batch)

    with the proxies as the base pair loss's anchors (``proxy_as_anchor=True``, the thesis,
    §3.2.3) or as its references (``False``, the authors' code). The in-batch term is not in the
    thesis; the authors' code uses ``batch_weight=0.1``.

    Args:
        base: spec of the pair loss (a :class:`~gspdml.losses.pairs.PairLoss`).
        proxies_per_class: ``K`` (CUB/Cars 8, SOP/In-Shop 4; §3.3.2.1, CCP hyper-parameters).
        pool_size: ``b`` samples per class in the k-center pool (CUB/Cars 12, SOP/In-Shop 7).
            ``b == K`` is random re-initialisation.
        prox_lambda: ``lambda`` of the proximal term (2e-4, §3.3.2.1, CCP hyper-parameters).
        patience: validation rounds without improvement that end a projection problem (3, §3.2.4, solving projections).
        metric: the validation metric that is monitored (MAP@R, §3.2.4, solving projections).
        regularize_first: apply the proximal term in the first problem, towards the initial
            weights (thesis Alg. 1); False = the authors' code (lambda = 0 until the first re-initialisation).
        snapshot: ``best`` (the authors' code): the best-validation weights and proxies of a finished
            problem become ``theta*`` and the old k-center centres; ``last``: the weights and
            proxies at the moment it ends (thesis Alg. 1, ``theta* <- theta, rho* <- rho``).
            Training always continues from the current weights.
        init: initial proxies; ``random`` (thesis: embeddings of ``K`` random samples per
            class) or ``kcenter``: greedy k-center over a pool of ``b``, starting at the first
            pool point (thesis Algorithm 2 without old centres). The authors' code starts from
            all-zero centres, which are nearer to every pool point than the points it picks, so
            it takes the ``K`` pool points of largest norm (``tests/parity/test_ccp_tf_step.py``).
        proxy_as_anchor, proxy_weight, batch_weight: see above.
        normalization: ``clip`` (default): embeddings and proxies enter the loss as
            ``v / max(1, ||v||)`` (Gürbüz thesis §3.2.4; the authors' ``lipschitz_cont: true`` in every CCP
            config); ``l2``: the base loss L2-normalises them, as it does on its own. Evaluation
            sees the same embeddings as the loss when the
            embedder clips too (``model.normalize: clip``, as the CCP presets set it).
    """

    #: the projection problems run between steps (gspdml.training.ccp_controller)
    controller = "ccp"

    base_kind = (PairLoss, "a pair loss (c1, c2, triplet, ms, ...)")

    @classmethod
    def check_options(  # type: ignore[override]  # CCP's options, all given by the registry
        cls, *, proxies_per_class: int, pool_size: int, **options: Any
    ) -> Refusal:
        if pool_size < proxies_per_class:
            message = f"must be >= proxies_per_class ({proxies_per_class}), got {pool_size}"
            return "pool_size", message
        return super().check_options(**options)

    def __init__(
        self,
        base: Any,
        embedding_dim: int,
        num_classes: int,
        proxies_per_class: Annotated[int, AT_LEAST_1] = 8,
        pool_size: int = 12,
        prox_lambda: Annotated[float, NON_NEGATIVE] = 2e-4,
        patience: Annotated[int, AT_LEAST_1] = 3,
        metric: str = "map_at_r",
        regularize_first: bool = False,
        snapshot: Annotated[str, OneOf(SNAPSHOTS)] = "best",
        init: Annotated[str, OneOf(INITS)] = "kcenter",
        proxy_as_anchor: bool = True,
        proxy_weight: float = 1.0,
        batch_weight: float = 0.0,
        normalization: Annotated[str, OneOf(NORMALIZATIONS)] = "clip",
    ):
        super().__init__(base, embedding_dim, num_classes)
        self.num_classes, self.k, self.pool_size = num_classes, proxies_per_class, pool_size
        self.prox_lambda, self.patience, self.metric = prox_lambda, patience, metric
        self.regularize_first, self.snapshot, self.init = regularize_first, snapshot, init
        self.proxy_as_anchor, self.normalization = proxy_as_anchor, normalization
        self.proxy_weight, self.batch_weight = proxy_weight, batch_weight
        if normalization == "clip":  # the pair loss measures the clipped vectors as they are
            cast(PairLoss, self.base).normalize_inputs = False
        # k-major layout: row k * C + c is proxy k of class c
        self.proxies = nn.Parameter(torch.zeros(num_classes * proxies_per_class, embedding_dim))
        self.register_buffer(
            "proxy_labels", torch.arange(num_classes).repeat(proxies_per_class), persistent=False
        )

    # ------------------------------------------------------------------ loss
    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        proxies: Tensor = self.proxies
        if self.normalization == "clip":
            embeddings, proxies = clip_normalize(embeddings), clip_normalize(proxies)
        loss: Tensor
        if self.proxy_as_anchor:
            loss = self.base(
                proxies, self.proxy_labels, reference=embeddings, reference_labels=labels
            )
        else:
            loss = self.base(
                embeddings, labels, reference=proxies, reference_labels=self.proxy_labels
            )
        loss = self.proxy_weight * loss
        if self.batch_weight:
            loss = loss + self.batch_weight * self.base(embeddings, labels)
        return loss

    # ---------------------------------------------------------------- proxies
    def set_proxies_from_pool(self, pool: Tensor, old_proxies: Optional[Tensor]) -> None:
        """Algorithm 2: pick ``K`` per class of the pool embeddings ``[C, b, D]`` by greedy k-center
        relative to ``old_proxies`` (``[C*K, D]``, k-major, compared after L2 normalisation, the loss's
        space; Algorithm 2 leaves it open) and make them the proxies."""
        pool = pool.to(self.proxies)
        old = None
        if old_proxies is not None:
            old = (
                F.normalize(old_proxies.to(self.proxies), dim=1)
                .reshape(self.k, self.num_classes, -1)
                .transpose(0, 1)
            )
        picks = select_proxies(pool, old, self.k).to(pool.device)
        classes = torch.arange(self.num_classes, device=pool.device)[:, None]
        chosen = pool[classes, picks]  # [C, K, D]
        with torch.no_grad():
            self.proxies.copy_(chosen.transpose(0, 1).reshape(-1, chosen.shape[-1]))
