"""SimPool: simple attention-based pooling (Psomas et al., ICCV 2023; Psomas thesis chapter 3)."""

from __future__ import annotations

import math
from typing import Union

import torch
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations, unflatten_weights
from gspdml.pooling.functional import full_precision, generalized_mean, require, wide


@POOLINGS.register("simpool")
class SimPool(Pooling):
    """SimPool (Psomas thesis §3.3.3, Algorithm 2, Eqs. 3.62-3.69):

        u0 = X 1_p / p                                  GAP of the raw features (3.62)
        q = W_Q u0,  K = W_K LN(X)                      (3.63), (3.68)
        a = softmax_p(K^T q / sqrt(d))                  attention over the p locations (3.65)
        V = LN(X) - min LN(X) + eps                     non-negative values (3.69)
        u = (V^gamma a)^(1/gamma)                       f_alpha pooling, gamma = (1 - alpha)/2 (3.67)

    ``gamma`` is a hyper-parameter: 2.0 for convolutional backbones, 1.25 for vision
    transformers (§3.4.4); the default ``"auto"`` takes 1.25 for token inputs ``[B, N, C]``
    (ViT) and 2.0 for feature maps ``[B, C, H, W]`` (CNNs). ``gamma: null`` is the
    attention-weighted average ``a`` of ``LN(X)`` without the shift (as coded). SimPool replaces
    the backbone's global pooling and reads the backbone features directly (the embedder's
    default placement projects after it). ``use_beta`` adds the learnable
    scalar shift of the released code (initial 0; the DINO ViT setting; not in the thesis).

    The minimum is taken per image (``min_scope: sample``, Eq. 3.66; the released code
    takes it over the whole batch), so a
    sample's output never depends on the rest of the batch; ``min_scope: batch`` reproduces
    the released code's batch-wide minimum. Parameters: ``W_Q``, ``W_K`` (``d x d``, no
    bias) and the LayerNorm affine (eps 1e-6), as in the released code. The attention ``a`` is returned
    as ``weights`` (a distribution over locations).
    """

    order_free = True
    weights_are_distribution = True

    #: gamma of ``gamma: auto`` by input layout (Psomas thesis §3.4.4)
    AUTO_GAMMA = {"tokens": 1.25, "maps": 2.0}

    def __init__(
        self,
        in_channels: int,
        gamma: Union[float, str, None] = "auto",
        use_beta: bool = False,
        min_scope: str = "sample",
        eps: float = 1e-6,
    ):
        super().__init__(in_channels)
        require(
            gamma is None or gamma == "auto" or (not isinstance(gamma, str) and gamma > 0),
            "gamma",
            f"must be positive, auto or null, got {gamma!r}",
        )
        require(
            min_scope in ("sample", "batch"),
            "min_scope",
            f"must be 'sample' or 'batch', got {min_scope!r}",
        )
        self.gamma = gamma if gamma in (None, "auto") else float(gamma)
        self.min_scope, self.eps = min_scope, float(eps)
        self.norm = nn.LayerNorm(in_channels, eps=1e-6)
        self.wq = nn.Linear(in_channels, in_channels, bias=False)
        self.wk = nn.Linear(in_channels, in_channels, bias=False)
        self.beta = nn.Parameter(torch.zeros(())) if use_beta else None

    def forward(self, x: torch.Tensor) -> Pooled:
        tokens, spatial = flatten_locations(x)  # [B, p, d]
        layout = "tokens" if x.dim() == 3 else "maps"
        gamma = self.AUTO_GAMMA[layout] if isinstance(self.gamma, str) else self.gamma  # str: auto
        query = self.wq(tokens.mean(dim=1))  # [B, d]
        normed = self.norm(tokens)
        keys = self.wk(normed)
        with full_precision(tokens):
            scores = wide(keys) @ wide(query).unsqueeze(-1) / math.sqrt(tokens.shape[-1])
            attention = torch.softmax(scores.squeeze(-1), dim=1)  # [B, p]
            values = wide(normed)
            weights = attention.to(values.dtype).unsqueeze(-1)
            if gamma is None:
                pooled = (weights * values).sum(dim=1)
            else:
                low = (
                    values.amin(dim=(1, 2), keepdim=True)
                    if self.min_scope == "sample"
                    else values.min()
                )
                pooled = generalized_mean(
                    values - low + self.eps, gamma, dim=1, weights=weights, eps=self.eps
                )
            if self.beta is not None:
                pooled = pooled + self.beta.to(pooled.dtype)
        return Pooled(pooled, weights=unflatten_weights(attention, spatial))
