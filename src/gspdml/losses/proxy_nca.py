"""ProxyNCA (Movshovitz-Attias et al. 2017) and ProxyNCA++ (Teh et al. 2020; ProxyNCA++ paper §3).

Both use the squared Euclidean distance of L2-normalised embeddings and proxies,
``d_ic = || x_i/||x_i|| - p_c/||p_c|| ||^2 = 2 - 2 cos(x_i, p_c)``, and logits ``-d_ic / T``.
With label weights (:meth:`ProxyNCA.mixed`) they are Metrix base losses (Psomas thesis Table 2.3,
"ProxyNCA++ + Metrix").
"""

from __future__ import annotations

from typing import Annotated, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.losses.base import LOSSES, LabelWeightedLoss, Output
from gspdml.losses.proxies import ProxyLoss
from gspdml.losses.reduction import Terms
from gspdml.typecheck import OneOf

#: the values of ``mixed_targets`` (:class:`ProxyNCA`), checked by the registry from a config and
#: when the loss is built from Python
MIXED_TARGETS = ("generic", "interpolated")


@LOSSES.register("proxy_nca", "proxynca")
class ProxyNCA(LabelWeightedLoss, ProxyLoss):
    """ProxyNCA with temperature ``T`` (ProxyNCA++ paper Eq. 3 and Eq. 6):

    * ``assignment_probability: false`` (ProxyNCA, ProxyNCA++ paper Eq. 3): the positive proxy is
      excluded from the denominator, ``L_i = d_{i,y_i}/T + log sum_{c != y_i} exp(-d_ic/T)``;
    * ``true`` (NCA form, ProxyNCA++ paper Eq. 4-6, "+prob"): softmax over all proxies, positive
      included, ``L_i = -log softmax_c(-d_ic/T)[y_i]`` (pytorch-metric-learning's
      ``ProxyNCALoss`` with ``softmax_scale = 1/T``).

    Reduction: mean over the batch. Proxies initialised ``N(0, 1/8^2)`` as in the ProxyNCA++
    code; ``lr_multiplier`` 100 (Gürbüz thesis §3.3.2.1, proxy-loss hyper-parameters).

    Under Metrix (:meth:`mixed`; Psomas thesis §2.3.5, Table 2.1) a mixed embedding ``v =
    mix_lambda(x, x')`` of classes ``c, c'`` is its own anchor, proxy ``q`` its positive with
    label ``y_q = lambda [q = c] + (1 - lambda) [q = c']`` (Eq. 2.8), entering by ``mixed_targets``:

    * ``generic`` (default; Eq. 2.9 with Table 2.1's ``sigma+ = -log``, ``sigma- = log``,
      ``rho = exp``): ``l~(v) = -log sum_q y_q e^{z_q} + log sum_q w_q e^{z_q}``, ``z_q = -d_vq/T``,
      ``w_q = 1`` with the assignment probability (ProxyNCA++ Eq. 6), else ``1 - y_q``;
    * ``interpolated``: mixup's targets (Zhang et al., ICLR 2018),
      ``lambda l(v; c) + (1 - lambda) l(v; c')``.

    Both equal the clean loss when ``lambda = 1`` and ``v = x``; the mixed loss is the mean over
    the mixed embeddings (docs/paper-vs-code.md, "ProxyNCA++ + Metrix").

    Args:
        temperature: ``T``, divides the negative squared distances.
        assignment_probability: softmax over all proxies, positive included (``true``, +prob) or
            without it (``false``).
        mixed_targets: ``generic`` or ``interpolated``: how a mixed embedding's labels enter
            (above).
    """

    #: Metrix: mixed examples are pairs of batch examples, each its own anchor against the proxies
    anchorless = True

    def __init__(
        self,
        num_classes: Optional[int] = None,
        embedding_dim: Optional[int] = None,
        temperature: float = 1.0,
        assignment_probability: bool = False,
        lr_multiplier: float = 100.0,
        mixed_targets: Annotated[str, OneOf(MIXED_TARGETS)] = "generic",
    ) -> None:
        super().__init__(num_classes, embedding_dim, 1, lr_multiplier)
        self.temperature = float(temperature)
        self.assignment_probability = bool(assignment_probability)
        self.mixed_targets = mixed_targets

    def reset_proxies(self) -> None:
        nn.init.normal_(self.proxies, std=1.0 / 8.0)

    def logits(self, embeddings: Tensor) -> Tensor:
        """``-d_ic / T`` ``[B, C]``."""
        return _logits(self.cosines(embeddings), self.temperature)

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        self.check_labels(labels)
        return self.loss_from_cosines(self.cosines(embeddings), labels)

    def loss_from_cosines(self, cos: Tensor, labels: Tensor) -> Tensor:
        """The loss from cosines ``[B, P]`` to ``P`` proxies of classes ``0 .. P - 1`` (Proxy
        Synthesis appends synthetic ones)."""
        logits = _logits(cos, self.temperature)
        return self.reduce({"examples": Terms(self.per_example(logits, labels))})

    def per_example(self, logits: Tensor, labels: Tensor) -> Tensor:
        """``[B]`` losses ``L_i`` of logits ``[B, C]`` under hard labels."""
        if self.assignment_probability:
            return F.cross_entropy(logits, labels, reduction="none")
        positive = logits.gather(1, labels[:, None]).squeeze(1)
        others = logits.scatter(1, labels[:, None], float("-inf"))
        return torch.logsumexp(others, dim=1) - positive

    def mixed(
        self, embeddings: Tensor, labels: Tensor, mixed: Tensor, triples: Tensor, lam: Tensor
    ) -> Tensor:
        """Mean over mixed embeddings ``v_j = lam_j x_first + (1 - lam_j) x_second`` of their loss
        against the proxies with interpolated labels (class docstring)."""
        first, second = labels[triples[:, 1]], labels[triples[:, 2]]
        logits = self.logits(mixed)
        lam = lam.to(logits.dtype)
        if self.mixed_targets == "interpolated":
            own = self.per_example(logits, first)
            other = self.per_example(logits, second)
            return self.reduce({"mixed": Terms(lam * own + (1 - lam) * other)})
        y = lam[:, None] * F.one_hot(first, self.num_classes).to(logits.dtype) + (1 - lam)[
            :, None
        ] * F.one_hot(second, self.num_classes).to(logits.dtype)
        weights = torch.ones_like(y) if self.assignment_probability else 1 - y
        positive = _weighted_logsumexp(logits, y)
        return self.reduce({"mixed": Terms(_weighted_logsumexp(logits, weights) - positive)})


@LOSSES.register("proxynca_pp", "proxy_nca_pp")
class ProxyNCAPlusPlus(ProxyNCA):
    """ProxyNCA++ (ProxyNCA++ paper Eq. 6): ``L_i = -log softmax_c(-d_ic / T)[y_i]``. Reduction: mean.

    Its six components (ProxyNCA++ paper §3, Fig. 2) and where each one is switched:

    ========================  ===================================================================
    +prob (assignment prob.)  ``assignment_probability`` (default true; false = ProxyNCA Eq. 3)
    +scale (low temperature)  ``temperature`` (default 1/9 as coded, i.e. logits ``18 cos - 18``;
                              Gürbüz thesis uses 0.1 in Ch. 3 and 0.11 in Ch. 5; 1 switches it off)
    +fast (fast proxies)      ``lr_multiplier`` (default 1: off). The paper's proxy/base lr ratio
                              4e2/4e-3 = 1e5 (1e4 on SOP) goes with Adam ``eps = 1``, which bounds
                              every step (presets ``proxynca-*``); the thesis runs x100 with Adam's
                              ``eps = 1e-8`` (Gürbüz thesis §3.3.2.1; presets ``*-pnca-*``). Either
                              pairing is named by the config that uses it, never implied.
    +cbs (class-balanced)     sampler: ``data.classes_per_batch`` x ``data.samples_per_class``
                              (ProxyNCA++ paper Table 1: 8 x 4 on CUB/Cars, 64 x 3 on SOP/In-shop);
                              Gürbüz thesis runs the proxy baselines at 32 x 1 (no cbs)
    +max (global max pool)    ``model.pooling: gmp``
    +norm (LayerNorm)         non-affine LayerNorm on the pooled backbone features before the
                              embedding layer: a model setting, not a loss option
    ========================  ===================================================================

    The presets ``losses/proxynca_pp-*`` set these. The authors' code
    (github.com/euwern/proxynca_pp) is ``CE(18 cos)``, i.e. ``T = 1/9``.

    Args:
        temperature: ``T`` (1/9 as coded; 1 switches +scale off).
        assignment_probability: +prob: the softmax includes the positive proxy (false: ProxyNCA Eq.
            3).
        lr_multiplier: learning-rate multiplier of the proxies.
        mixed_targets: how a mixed embedding's labels enter, as for ``proxy_nca``.
    """

    def __init__(
        self,
        num_classes: Optional[int] = None,
        embedding_dim: Optional[int] = None,
        temperature: float = 1.0 / 9.0,
        assignment_probability: bool = True,
        lr_multiplier: float = 1.0,
        mixed_targets: Annotated[str, OneOf(MIXED_TARGETS)] = "generic",
    ) -> None:
        super().__init__(
            num_classes,
            embedding_dim,
            temperature,
            assignment_probability,
            lr_multiplier,
            mixed_targets,
        )


def _logits(cos: Tensor, temperature: float) -> Tensor:
    """``-d / T`` with ``d = 2 - 2 cos``, the squared distance of unit vectors."""
    return -(2.0 - 2.0 * cos).clamp(min=0.0) / temperature


def _weighted_logsumexp(logits: Tensor, weights: Tensor) -> Tensor:
    """``log sum_q w_q e^{z_q}`` per row, stable (terms of weight 0 are left out)."""
    masked = logits.masked_fill(weights <= 0, float("-inf"))
    top = masked.amax(dim=1, keepdim=True).detach().clamp(min=-1e4)
    total = (weights.clamp(min=0) * torch.exp(masked - top)).sum(dim=1)
    return torch.log(total) + top.squeeze(1)
