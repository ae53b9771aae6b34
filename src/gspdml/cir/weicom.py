"""WeiCom: training-free composed retrieval by per-query CDF-normalised similarity fusion.

Psomas thesis §5.3.3, Eq. 5.2, with the misprint "λ s'_q" read as λ s'_g
(λ = 1 must be text-only, as the text after Eq. 5.2 says):

    s_WC(q, x) = λ · s'_g(q, x) + (1 − λ) · s'_f(q, x)

where, for each query and each modality separately (§5.3.3),

    s'(q, x) = Φ( (s(q, x) − μ_q) / σ_q ),   μ_q, σ_q = mean and std of s(q, ·) over the database,

and Φ is the standard normal CDF, evaluated as ``0.5 · (1 + erf(z / √2))`` as in the official
code's ``norm_cdf`` (github.com/billpsomas/rscir). σ is the *unbiased* std (N − 1), as coded
(N = 30,400 makes the difference negligible). λ defaults: 0.3 for CLIP and 0.6 for RemoteCLIP
(§5.4.3, Table 5.3; :data:`DEFAULT_LAMBDA`);
0.5 is the code's CLI default and the "WeiCom" competitor of chapter 4 (§4.4.4), which sums the two
CDFs (same ranking as λ = 0.5).
"""

from __future__ import annotations

import math

import torch

from gspdml.errors import ConfigError

from .baselines import unimodal_scores

DEFAULT_LAMBDA = {"clip": 0.3, "remoteclip": 0.6}
FALLBACK_LAMBDA = 0.5


def default_lambda(model_name: str) -> float:
    """λ of the thesis for a backbone name (``"RemoteCLIP"`` → 0.6, any other CLIP → 0.3);
    0.5 when the name is neither."""
    key = model_name.lower().replace("-", "").replace("_", "")
    if "remoteclip" in key:
        return DEFAULT_LAMBDA["remoteclip"]
    if "clip" in key:
        return DEFAULT_LAMBDA["clip"]
    return FALLBACK_LAMBDA


def cdf_normalize(scores: torch.Tensor, unbiased: bool = True, eps: float = 1e-12) -> torch.Tensor:
    """Φ((s − mean) / std) along the last axis (each query over the whole database).

    A constant row (std 0) maps to 0.5 everywhere instead of NaN.
    """
    if scores.shape[-1] < 2:
        raise ConfigError(
            "database", f"CDF normalisation needs at least 2 database items, got {scores.shape[-1]}"
        )
    mean = scores.mean(dim=-1, keepdim=True)
    std = scores.std(dim=-1, keepdim=True, unbiased=unbiased)
    z = (scores - mean) / std.clamp(min=eps)
    return 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))


def weicom_fuse(
    image_scores: torch.Tensor,
    text_scores: torch.Tensor,
    lam: float = FALLBACK_LAMBDA,
    unbiased: bool = True,
) -> torch.Tensor:
    """Eq. 5.2 from raw similarities ``[Q, N]``: λ·Φ̂(s_g) + (1 − λ)·Φ̂(s_f)."""
    lam = float(lam)
    if not 0.0 <= lam <= 1.0:
        raise ConfigError("lambda", f"must be in [0, 1] (0 = image only, 1 = text only), got {lam}")
    if image_scores.shape != text_scores.shape:
        raise ConfigError(
            "scores",
            f"image and text scores must have the same shape, got {tuple(image_scores.shape)} and {tuple(text_scores.shape)}",
        )
    return lam * cdf_normalize(text_scores, unbiased) + (1.0 - lam) * cdf_normalize(
        image_scores, unbiased
    )


def weicom_scores(
    image_queries: torch.Tensor,
    text_queries: torch.Tensor,
    database: torch.Tensor,
    lam: float = FALLBACK_LAMBDA,
) -> torch.Tensor:
    """WeiCom scores ``[Q, N]`` from ℓ2-normalised f(y) ``[Q, D]``, g(t) ``[Q, D]`` and f(X) ``[N, D]``."""
    s_image, s_text = unimodal_scores(image_queries, text_queries, database)
    return weicom_fuse(s_image, s_text, lam)
