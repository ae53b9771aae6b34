"""SimPool: simple attention-based pooling (Psomas et al., ICCV 2023; Psomas thesis chapter 3),
with the options of its design ablation (thesis §3.4.4, Table 3.12)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Optional, Union

import torch
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations, unflatten_weights
from gspdml.pooling.framework import (
    ATTENTIONS,
    INITIALISATIONS,
    SIMILARITIES,
    attention_matrix,
    kmeans_centroids,
    merge_heads,
    scaled_similarity,
    split_heads,
    squared_norm_average,
)
from gspdml.pooling.functional import full_precision, generalized_mean, require, wide
from gspdml.typecheck import AT_LEAST_1, POSITIVE, OneOf, Refusal

#: where Table 3.12 (right) places linear and LayerNorm layers: query, key, value
PLACES = ("q", "k", "v")
#: how ``k > 1`` pooled vectors become one (Table 3.12: k (max), k (concat))
COMBINATIONS = ("max", "concat")


def _add_maps(
    module: nn.Module, d: int, linear: frozenset[str], layernorm: frozenset[str], shared_qk: bool
) -> None:
    """Give ``module`` the maps of one iteration (None where absent): ``norm`` (LayerNorm of the
    features), ``norm_q`` (of the query input), ``wq``, ``wk``, ``wv`` (``d x d``, no bias)."""
    wq = nn.Linear(d, d, bias=False) if "q" in linear else None
    maps = {
        "norm": nn.LayerNorm(d, eps=1e-6) if layernorm & {"k", "v"} else None,
        "norm_q": nn.LayerNorm(d, eps=1e-6) if "q" in layernorm else None,
        "wq": wq,
        "wk": wq if shared_qk else (nn.Linear(d, d, bias=False) if "k" in linear else None),
        "wv": nn.Linear(d, d, bias=False) if "v" in linear else None,
    }
    for name, layer in maps.items():
        setattr(module, name, layer)


class IterationMaps(nn.Module):
    """The maps of one later iteration when iterations do not share parameters."""

    def __init__(self, d: int, linear: frozenset[str], layernorm: frozenset[str], shared_qk: bool):
        super().__init__()
        _add_maps(self, d, linear, layernorm, shared_qk)


def _apply(layer: Any, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)``, or ``x`` where the layer is absent (None)."""
    return x if layer is None else layer(x)


@POOLINGS.register("simpool")
class SimPool(Pooling):
    """SimPool (Psomas thesis §3.3.3, Algorithm 2, Eqs. 3.62-3.69):

        u0 = X 1_p / p                                  GAP of the raw features (3.62)
        q = W_Q u0,  K = W_K LN(X)                      (3.63), (3.68)
        a = softmax_p(K^T q / sqrt(d))                  attention over the p locations (3.65)
        V = LN(X) - min LN(X) + eps                     non-negative values (3.69)
        u = (V^gamma a)^(1/gamma)                       f_alpha pooling, gamma = (1 - alpha)/2 (3.67)

    ``gamma``: 2.0 for CNN maps ``[B, C, H, W]``, 1.25 for ViT tokens ``[B, N, C]`` (§3.4.4);
    ``null``: the attention-weighted average of ``LN(X)`` without the shift (as coded).
    ``use_beta``: the DINO ViT setting (not in the thesis). SimPool replaces the backbone's global
    pooling and reads its features directly. Parameters: ``W_Q``, ``W_K`` (``d x d``, no bias)
    and the LayerNorm affine (eps 1e-6), as released. The minimum is per image (Eq. 3.66), so a
    sample's output never depends on the rest of the batch.
    ``weights`` is the attention averaged over heads and pooled vectors (a distribution). The
    options from ``attention`` on are those of the ablation (Table 3.12; the defaults are SimPool),
    in the terms of the generic framework (Algorithm 1, :mod:`gspdml.pooling.framework`).

    Args:
        gamma: the ``gamma`` of ``f_alpha`` pooling (``auto``: 1.25 for tokens, 2.0 for maps;
            null: the attention-weighted average, above).
        use_beta: add the released code's learnable scalar shift (initial 0).
        min_scope: the minimum of the values per image (``sample``, Eq. 3.66) or over the whole
            batch (``batch``, the released code).
        eps: added to the shifted values (non-negative for the power).
        attention: ``h``, ``softmax`` (``sigma_2``, Eq. 3.65) or ``slot``
            (``eta_2(sigma_1(.))``).
        heads: ``m`` heads (Table 3.12 uses 4); head ``h`` attends with channels
            ``h d/m .. (h+1) d/m - 1`` of queries and keys, scaled by ``sqrt(d/m)``, and pools
            the same channels of the values.
        similarity: ``s``, ``dot`` (``k^T q``), ``neg_sq_euclidean`` or ``cosine``.
        init: ``U^0``, ``gap`` (Eq. 3.62), ``diag`` (``X diag(X^T X) / tr(X^T X)``), ``learned``
            (a parameter ``U``, ``k x d``, normal with std 0.02) or ``kmeans`` (Lloyd's k-means
            on ``X`` for ``kmeans_steps`` iterations); ``k > 1`` needs ``kmeans`` or ``learned``.
        k: pooled vectors, combined by ``combine``.
        combine: ``max`` (elementwise maximum over the ``k`` vectors) or ``concat``
            (concatenation ``[u_1; ..; u_k]`` projected back to ``d`` by a learnable ``d x kd``
            matrix, no bias).
        kmeans_steps: Lloyd iterations of ``init: kmeans``.
        iterations: ``T`` rounds of Algorithm 1 with ``U^{t+1} = Z^t`` (the pooled vectors
            become the next queries' input, ``phi_X = phi_U = id``).
        share_iterations: every round uses the same maps (the thesis's LAYERS rows, "shared
            parameters at every iteration") or each its own (ITER rows).
        linear, layernorm: where the linear maps (``W_Q``, ``W_K``, ``W_V``) and the LayerNorm
            sit (Table 3.12, right): ``q = W_Q LN(u^t)``, ``K = W_K LN(X)``, ``V = W_V LN(X)``
            for every place listed, the identity for the others (one LayerNorm of ``X`` serves
            keys and values, one of ``u^t`` the query).
        shared_qk: ``W_K = W_Q``.
    """

    order_free = True
    weights_are_distribution = True

    #: gamma of ``gamma: auto`` by input layout (Psomas thesis §3.4.4)
    AUTO_GAMMA = {"tokens": 1.25, "maps": 2.0}

    @classmethod
    def check_options(cls, *, k: int, init: str, **_: Any) -> Refusal:
        """The rules across options, checked before a build (:class:`gspdml.registry.Registry`)."""
        if k != 1 and init not in ("kmeans", "learned"):
            return (
                "init",
                f"{init!r} gives one vector; k={k} pooled vectors need init: kmeans or learned",
            )
        return None

    def __init__(
        self,
        in_channels: int,
        gamma: Union[Annotated[float, POSITIVE], Annotated[str, OneOf(("auto",))], None] = "auto",
        use_beta: bool = False,
        min_scope: Annotated[str, OneOf(("sample", "batch"))] = "sample",
        eps: float = 1e-6,
        attention: Annotated[str, OneOf(ATTENTIONS)] = "softmax",
        heads: int = 1,
        similarity: Annotated[str, OneOf(SIMILARITIES)] = "dot",
        init: Annotated[str, OneOf(INITIALISATIONS)] = "gap",
        k: Annotated[int, AT_LEAST_1] = 1,
        combine: Annotated[str, OneOf(COMBINATIONS)] = "max",
        kmeans_steps: Annotated[int, AT_LEAST_1] = 10,
        iterations: Annotated[int, AT_LEAST_1] = 1,
        share_iterations: bool = True,
        linear: Sequence[str] = ("q", "k"),
        layernorm: Sequence[str] = ("k", "v"),
        shared_qk: bool = False,
    ):
        super().__init__(in_channels)
        require(
            _positive_int(heads) and in_channels % heads == 0,
            "heads",
            f"must be a positive integer dividing the {in_channels} channels, got {heads!r}",
        )
        places = {
            name: _places(value, name)
            for name, value in (("linear", linear), ("layernorm", layernorm))
        }
        require(
            not shared_qk or {"q", "k"} <= places["linear"],
            "shared_qk",
            f"W_K = W_Q needs linear layers on q and k, got linear: {sorted(places['linear'])}",
        )
        self.gamma = gamma if gamma in (None, "auto") else float(gamma)
        self.min_scope, self.eps = min_scope, float(eps)
        self.attention, self.heads, self.similarity = attention, int(heads), similarity
        self.init, self.k, self.kmeans_steps = init, int(k), int(kmeans_steps)
        self.iterations, self.layernorm = int(iterations), places["layernorm"]
        maps = (in_channels, places["linear"], places["layernorm"], bool(shared_qk))
        _add_maps(self, *maps)
        separate = 0 if share_iterations else self.iterations - 1
        self.later_maps = nn.ModuleList(IterationMaps(*maps) for _ in range(separate))
        self.initial = (
            nn.Parameter(0.02 * torch.randn(self.k, in_channels)) if init == "learned" else None
        )
        self.project = (
            nn.Linear(self.k * in_channels, in_channels, bias=False)
            if self.k > 1 and combine == "concat"
            else None
        )
        self.beta = nn.Parameter(torch.zeros(())) if use_beta else None

    def forward(self, x: torch.Tensor) -> Pooled:
        pooled, attention_map, spatial = self._rounds(x)
        if self.k == 1:
            vector = pooled[:, 0]
        elif self.project is None:
            vector = pooled.amax(dim=1)
        else:
            vector = self.project(pooled.flatten(1).to(x.dtype))
        if self.beta is not None:
            vector = vector + self.beta.to(vector.dtype)
        weights = attention_map.mean(dim=(1, 3))  # over heads and pooled vectors: [B, p]
        return Pooled(vector, weights=unflatten_weights(weights, spatial))

    def vectors(self, x: torch.Tensor) -> torch.Tensor:
        """The ``k`` pooled vectors ``[B, k, d]`` before ``combine`` (with ``beta`` added): what
        a classifier reads when it takes the maximum over the vectors' logits instead (Psomas
        thesis Table 3.12, "k (max): maximum taken over output logits")."""
        pooled = self._rounds(x)[0]
        return pooled if self.beta is None else pooled + self.beta.to(pooled.dtype)

    def _rounds(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...]]:
        """The ``T`` rounds of Algorithm 1 on ``x``: the pooled vectors ``[B, k, d]``, the last
        round's attention ``[B, m, p, k]`` and the spatial shape of ``x``."""
        tokens, spatial = flatten_locations(x)  # [B, p, d]
        layout = "tokens" if x.dim() == 3 else "maps"
        gamma = self.AUTO_GAMMA[layout] if isinstance(self.gamma, str) else self.gamma  # str: auto
        pooled = self._initial(tokens)  # U^0 [B, k, d]
        for t in range(self.iterations):
            maps = self.later_maps[t - 1] if t > 0 and len(self.later_maps) else self
            pooled, attention_map = self._attend(maps, pooled, tokens, gamma)
        return pooled, attention_map, spatial

    def _initial(self, tokens: torch.Tensor) -> torch.Tensor:
        """``U^0 = INIT(X)`` ``[B, k, d]`` (class docstring)."""
        if self.init == "gap":
            return tokens.mean(dim=1, keepdim=True)
        if self.init == "diag":
            return squared_norm_average(tokens)
        if self.init == "kmeans":
            return kmeans_centroids(tokens, self.k, self.kmeans_steps)
        assert self.initial is not None  # init: learned
        return self.initial.to(tokens.dtype).expand(tokens.shape[0], -1, -1)

    def _attend(
        self, maps: nn.Module, pooled: torch.Tensor, tokens: torch.Tensor, gamma: Optional[float]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One round of Algorithm 1: the next pooled vectors ``Z`` ``[B, k, d]`` and the
        attention ``A`` ``[B, m, p, k]`` of the queries of ``pooled`` over ``tokens``."""
        query = _apply(maps.wq, _apply(maps.norm_q, pooled.to(tokens.dtype)))  # [B, k, d]
        normed = _apply(maps.norm, tokens)
        keys = _apply(maps.wk, normed if "k" in self.layernorm else tokens)
        values = _apply(maps.wv, normed if "v" in self.layernorm else tokens)
        with full_precision(tokens):
            scores = scaled_similarity(
                split_heads(wide(keys), self.heads),
                split_heads(wide(query), self.heads),
                self.similarity,
            )
            attention_map = attention_matrix(scores, self.attention)  # [B, m, p, k]
            values = wide(values)
            weights = attention_map.to(values.dtype).unsqueeze(-1)  # [B, m, p, k, 1]
            if gamma is None:
                heads = (weights * split_heads(values, self.heads).unsqueeze(3)).sum(dim=2)
            else:
                per_sample = self.min_scope == "sample"
                low = values.amin(dim=(1, 2), keepdim=True) if per_sample else values.min()
                shifted = split_heads(values - low + self.eps, self.heads).unsqueeze(3)
                heads = generalized_mean(shifted, gamma, dim=2, weights=weights, eps=self.eps)
        return merge_heads(heads), attention_map  # heads: [B, m, k, d/m]


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _places(value: Union[str, Sequence[str]], option: str) -> frozenset[str]:
    """The places (``q``, ``k``, ``v``) of ``linear`` / ``layernorm``, checked."""
    names = [value] if isinstance(value, str) else list(value)
    require(
        all(name in PLACES for name in names) and len(set(names)) == len(names),
        option,
        f"must list distinct places among {list(PLACES)} (query, key, value), got {value!r}",
    )
    return frozenset(names)
