"""Generalized Sum Pooling (GSP; Gürbüz et al., GSP paper §4, Algorithms 2-3; Gürbüz thesis Ch. 5).

A weighted sum of the local features, weighted by an entropy-smoothed partial transport of their
uniform mass to ``m`` learnable prototypes (:func:`~gspdml.pooling.gsp.transport.partial_transport`)::

    c_ij = || clip(w_i) - clip(f_j) ||_2,   clip(u) = u / max(1, ||u||)    (GSP paper §4.1)
    rho, pi = (P2)(c; mu, eps, iters)                                       (Prop. 4.1)
    p_j = (1/n - rho_j) / mu,   x = sum_j p_j f_j                            (Eq. 4.1)
    z   = pi 1_n / mu   (pseudo-attributes, mass per prototype)             (Eq. 4.3)

``mu = 1`` gives GAP exactly (Claim 4.1). Variants:

* ``gem_p > 1``: GeMean+GSP of Algorithm 2, ``x = ((1/n) sum_j (n p_j f_j)^p)^(1/p)`` (clamped
  at ``1e-6``); ``learn_gem_p`` learns ``p`` (the authors' TF ``use_gemp``, initialised at 3);
* ``add_max_pool``: the conventional-protocol branch, ``x + max_j f_j``;
* ``weighting="background"``: weights ``rho_j / (1 - mu)`` (GSP paper App. B.2).

Inside the :class:`~gspdml.models.Embedder` the layer also receives the backbone map ``F`` and
the 1x1 head ``W`` with ``f = W F`` (``forward(f, source=F, project=W)``); as in the authors'
TF layer, ``add_max_pool`` then adds ``W GMP(F)`` and GeMean+GSP pools ``W GeM(n p_j F_j)``. The
transport weights always come from ``f``; without ``source`` the variants act on ``f``.

``init="kcenter"`` (the authors' TF framework, github.com/yetigurbuz/generalized-sum-pooling):
in training the layer pools as GAP for the first ``memory_size`` samples, storing their
clip-normalised GAP vectors; once the memory is full, greedy k-center picks the ``m``
prototypes among them, the first ``m`` serving as its initial centres (as the TF layer's
``initialize_support_kernel``; :meth:`GSP.initialize_prototypes`). The trainer finishes this before the first evaluation
(:meth:`GSP.finish_initialisation`). Memory, fill count and switch are buffers, kept by
checkpoints. ``init="random"``: Glorot-uniform prototypes, transport from the first step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Optional

import torch
from torch import nn

from gspdml.errors import ConfigError
from gspdml.ops.kcenter import greedy_k_center
from gspdml.ops.normalize import clip_normalize
from gspdml.pooling.base import (
    POOLINGS,
    LazyInitialised,
    Pooled,
    Pooling,
    channels_first_locations,
    unflatten_weights,
)
from gspdml.pooling.gsp.fused import cost_parts, fused_gsp, pooling_weights
from gspdml.pooling.gsp.transport import BACKWARDS, exporting, partial_transport
from gspdml.typecheck import AT_LEAST_1, NON_NEGATIVE, Interval, OneOf, Refusal

INITS = ("kcenter", "random")
Linear = Callable[[torch.Tensor], torch.Tensor]
WEIGHTINGS = ("foreground", "background")


def prototype_costs(prototypes: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
    """Non-squared L2 costs ``[B, m, n]`` between clip-normalised prototypes ``[m, d]`` and the
    clip-normalised columns of ``features [B, d, n]``; the square root is smoothed by ``1e-12``
    so that a feature equal to a prototype has a finite gradient (see
    :func:`~gspdml.pooling.gsp.fused.cost_parts` for the form used)."""
    return cost_parts(prototypes, features)[0]


@POOLINGS.register("gsp")
class GSP(Pooling, LazyInitialised):
    """Generalized Sum Pooling (module docstring); it projects each location and then pools
    (``head_placement = "local"``): its costs live in the embedding space (GSP paper §4).

    Args:
        in_channels: local feature size ``d`` (supplied by the embedder).
        num_prototypes: ``m`` (64 for CUB/Cars, 128 for SOP/In-shop; GSP paper §4.4).
        mu: transported fraction (0.3 in the papers; 1 gives GAP).
        eps: entropy weight (5.0 with pair losses, 0.5 with proxy losses; GSP paper §4.4).
        iters: fixed-point iterations (100).
        gem_p: generalized-mean power; 1 is plain GSP, ``> 1`` GeMean+GSP (Algorithm 2).
        learn_gem_p: train ``gem_p`` as a parameter (the TF ``use_gemp`` path).
        add_max_pool: add the global-max-pooled feature (conventional protocol), ``W GMP(F)``
            inside the embedder.
        weighting: ``"foreground"`` (``(1/n - rho)/mu``) or ``"background"`` (``rho/(1-mu)``).
        init: ``"kcenter"`` (GAP warm-up, then greedy k-center on a memory) or ``"random"``.
        memory_size: samples collected during the warm-up (1024 in the authors' framework).
        backward: ``"closed_form"`` (Prop. 4.2) or ``"unrolled"`` (autograd through the loop).
    """

    head_placement = "local"
    provides = frozenset({"weights", "attributes"})
    #: buffers (registered in ``__init__``): the warm-up memory, how much of it is filled, and
    #: whether the prototypes are set
    memory: torch.Tensor
    memory_filled: torch.Tensor
    initialized: torch.Tensor

    @classmethod
    def check_options(
        cls,
        *,
        mu: float,
        gem_p: float,
        learn_gem_p: bool,
        weighting: str,
        init: str,
        num_prototypes: int,
        memory_size: int,
        **_: Any,
    ) -> Refusal:
        """The rules across options, checked before a build (:class:`gspdml.registry.Registry`)."""
        if learn_gem_p and gem_p == 1.0:
            return "learn_gem_p", "a learnable GeM power needs GeMean+GSP (gem_p > 1, e.g. 3)"
        if weighting == "background" and mu >= 1.0:
            return "weighting", "background weighting needs mu < 1 (at mu = 1 nothing is left over)"
        if init == "kcenter" and memory_size < num_prototypes:
            needs = f"k-center needs at least num_prototypes={num_prototypes} samples"
            return "memory_size", f"{needs}, got {memory_size}"
        return None

    def __init__(
        self,
        in_channels: int,
        num_prototypes: Annotated[int, AT_LEAST_1] = 64,
        mu: Annotated[float, Interval(0, 1, low_open=True, what="the transported fraction")] = 0.3,
        eps: Annotated[float, Interval(0, low_open=True, what="the entropy weight")] = 5.0,
        iters: Annotated[int, NON_NEGATIVE] = 100,
        gem_p: Annotated[float, Interval(1, what="the generalized-mean power")] = 1.0,
        learn_gem_p: bool = False,
        add_max_pool: bool = False,
        weighting: Annotated[str, OneOf(WEIGHTINGS)] = "foreground",
        init: Annotated[str, OneOf(INITS)] = "kcenter",
        memory_size: int = 1024,
        backward: Annotated[str, OneOf(BACKWARDS)] = "closed_form",
    ):
        super().__init__(in_channels)
        self.num_prototypes, self.iters = num_prototypes, int(iters)
        self.mu, self.eps = float(mu), float(eps)
        self.gem_p, self.add_max_pool, self.weighting = float(gem_p), bool(add_max_pool), weighting
        self.init, self.backward = init, backward
        self.gem_power = nn.Parameter(torch.tensor(float(gem_p))) if learn_gem_p else None
        self.prototypes = nn.Parameter(
            nn.init.xavier_uniform_(torch.empty(num_prototypes, in_channels))
        )
        size = memory_size if init == "kcenter" else 0
        self.register_buffer("memory", torch.zeros(size, in_channels))
        self.register_buffer("memory_filled", torch.zeros((), dtype=torch.long))
        self.register_buffer("initialized", torch.tensor(init == "random"))
        self._initialised_read: Optional[tuple[tuple[int, int, int], bool]] = None

    def extra_repr(self) -> str:
        return (
            f"in_channels={self.in_channels}, num_prototypes={self.num_prototypes}, mu={self.mu}, eps={self.eps}, "
            f"iters={self.iters}, gem_p={self.gem_p}, add_max_pool={self.add_max_pool}, weighting={self.weighting}, "
            f"init={self.init}"
        )

    def reads_backbone_map(self) -> bool:
        """Whether :meth:`forward` uses the backbone map when the embedder passes it."""
        return self.add_max_pool or self.gem_p != 1.0

    def forward(
        self,
        x: torch.Tensor,
        source: Optional[torch.Tensor] = None,
        project: Optional[Linear] = None,
    ) -> Pooled:
        """Pool ``x`` (``[B, d, H, W]`` or ``[B, N, d]``); ``source`` is the backbone map that the
        linear map ``project`` (``[*, C] -> [*, d]``, no bias) turned into ``x`` (module docstring)."""
        local, spatial = channels_first_locations(x)  # [B, d, n]
        if (source is None) != (project is None):
            raise ValueError("GSP.forward: source (the backbone map) and project come together")
        raw = channels_first_locations(source)[0] if source is not None else None
        with torch.autocast(device_type=local.device.type, enabled=False):
            b, _, n = local.shape
            work = torch.float64 if local.dtype == torch.float64 else torch.float32
            # an export records the transport path without reading the flag (a traced branch);
            # uninitialised layers are refused before export (gspdml.training.load_run)
            initialized = exporting() or self.is_initialised
            if initialized and self._fused():
                background = self.weighting == "background"
                vector, weights, attributes = fused_gsp(
                    local, self.prototypes.to(work), self.mu, self.eps, self.iters, background
                )
            else:
                local = local.to(work).contiguous()  # the composed ops run fastest so
                if initialized:
                    weights, attributes = self._transport_weights(local)
                else:
                    if self.training:
                        self._remember(local.mean(dim=2))
                    weights = local.new_full((b, n), 1.0 / n)
                    attributes = local.new_zeros(b, self.num_prototypes)
                gem_of_map = self.gem_p != 1.0 and self.is_initialised
                if raw is not None and project is not None and gem_of_map:
                    vector = project(self._aggregate(raw.to(work), weights))
                else:
                    vector = self._aggregate(local, weights)
            if self.add_max_pool:
                vector = vector + (
                    project(raw.to(work).amax(dim=2))
                    if raw is not None and project is not None
                    else local.amax(dim=2)
                )
        return Pooled(vector, unflatten_weights(weights, spatial), attributes)

    def _fused(self) -> bool:
        """Training with the closed-form backward goes through the fused function
        (:mod:`gspdml.pooling.gsp.fused`); GeM, ``mu = 1``, the unrolled backward, inference and
        export compose autograd pieces (the same values)."""
        return (
            self.backward == "closed_form"
            and self.gem_p == 1.0
            and self.mu < 1.0
            and torch.is_grad_enabled()
        )

    def _transport_weights(self, local: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cost = prototype_costs(self.prototypes.to(local.dtype), local)
        rho, pi = partial_transport(cost, self.mu, self.eps, self.iters, backward=self.backward)
        weights = pooling_weights(rho, self.mu, self.weighting == "background")
        return weights, pi.sum(dim=2) / self.mu

    def _aggregate(self, local: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``sum_j p_j f_j`` (or its GeM form) of ``local [B, d, n]`` with weights ``[B, n]``."""
        if self.gem_p == 1.0:
            return (local * weights.unsqueeze(1)).sum(dim=2)
        n = local.shape[2]
        p = self.gem_power.to(local.dtype) if self.gem_power is not None else self.gem_p
        scaled = (n * weights.to(local.dtype)).unsqueeze(1) * local  # (1 - n rho)/mu f, Alg. 2
        return scaled.clamp_min(1e-6).pow(p).mean(dim=2).pow(1.0 / p)

    @torch.no_grad()
    def _remember(self, pooled: torch.Tensor) -> None:
        """Store clip-normalised GAP vectors; when the memory is full, pick the prototypes."""
        start = int(self.memory_filled)
        take = min(self.memory.shape[0] - start, pooled.shape[0])
        self.memory[start : start + take] = clip_normalize(pooled[:take].detach()).to(self.memory)
        self.memory_filled += take
        if int(self.memory_filled) >= self.memory.shape[0]:
            self.initialize_prototypes(self.memory)

    @property
    def is_initialised(self) -> bool:
        """False while a k-center layer still pools as GAP. The flag is a buffer, read from the device
        only when its version changed, so a GPU training step does not wait for it."""
        flag = self.initialized
        key = (id(flag), flag.data_ptr(), flag._version)
        if self._initialised_read is None or self._initialised_read[0] != key:
            self._initialised_read = (key, bool(flag))
        return self._initialised_read[1]

    @property
    def samples_needed(self) -> int:
        """k-center picks ``m`` prototypes among the remembered samples: it needs ``m``."""
        return self.num_prototypes

    @property
    def samples_seen(self) -> int:
        return int(self.memory_filled)

    @torch.no_grad()
    def finish_initialisation(self) -> int:
        """Pick the prototypes from the samples remembered so far (the trainer calls this before weights
        are first evaluated or saved); returns the number of samples used (0 when already initialised).
        """
        if self.is_initialised:
            return 0
        filled = int(self.memory_filled)
        self.initialize_prototypes(self.memory[:filled])
        return filled

    @torch.no_grad()
    def initialize_prototypes(self, points: torch.Tensor) -> None:
        """Set the prototypes to ``m`` points chosen by greedy k-center and switch to transport
        pooling (in place, so an optimiser built earlier keeps training them).

        As the authors' TF layer (``initialize_support_kernel``): the first ``m`` points are the
        traversal's initial centres, and the prototypes are picked among the others. With fewer
        than ``2m`` points (a memory finished early, :meth:`finish_initialisation`) the traversal
        starts at the first point and picks among all of them."""
        m = self.num_prototypes
        if points.shape[0] < m:
            raise ConfigError("memory_size", f"k-center needs {m} points, got {points.shape[0]}")
        centres, candidates = (
            (points[:m], points[m:]) if points.shape[0] >= 2 * m else (None, points)
        )
        chosen = greedy_k_center(candidates, m, initial_centers=centres).to(points.device)
        self.prototypes.copy_(candidates[chosen].to(self.prototypes))
        self.initialized.fill_(True)
