"""The simple composed-retrieval baselines of chapters 4 and 5 (Psomas thesis).

All inputs are ℓ2-normalised: ``image_queries [Q, D]`` (f(y)), ``text_queries [Q, D]`` (g(t)),
``database [N, D]`` (f(x)). Outputs are scores ``[Q, N]``.

* ``text``:    s_g = g(t)ᵀ f(x)                        (h_T, Psomas thesis §4.4.2; s_g, §5.3.2)
* ``image``:   s_f = f(y)ᵀ f(x)                        (h_V, §4.4.2; s_f, §5.3.2)
* ``product``: s_g · s_f                              ("Text × Image", §4.4.2)
* ``sum``:     (g(t) + f(y))ᵀ f(x) = s_g + s_f          ("Text + Image", h_S, §4.4.2)
* ``average``: (s_g + s_f) / 2                         (Eq. 5.1, §5.3.2; the same ranking as ``sum``)
"""

from __future__ import annotations

import torch

from gspdml.errors import ConfigError

from .freedom import check_choice

BASELINES = ("text", "image", "product", "sum", "average")


def unimodal_scores(
    image_queries: torch.Tensor, text_queries: torch.Tensor, database: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s_f, s_g)``: image→database and text→database cosine similarities ``[Q, N]``."""
    if image_queries.shape != text_queries.shape:
        raise ConfigError(
            "queries",
            f"image and text queries must have the same shape, got {tuple(image_queries.shape)} and {tuple(text_queries.shape)}",
        )
    if image_queries.shape[-1] != database.shape[-1]:
        raise ConfigError(
            "database",
            f"query dimension {image_queries.shape[-1]} != database dimension {database.shape[-1]}",
        )
    return image_queries @ database.T, text_queries @ database.T


def baseline_scores(
    method: str, image_queries: torch.Tensor, text_queries: torch.Tensor, database: torch.Tensor
) -> torch.Tensor:
    """Scores ``[Q, N]`` of one baseline (see the module docstring)."""
    check_choice("method", "baseline", method, BASELINES)
    s_image, s_text = unimodal_scores(image_queries, text_queries, database)
    if method == "text":
        return s_text
    if method == "image":
        return s_image
    if method == "product":
        return s_text * s_image
    if method == "sum":
        return s_text + s_image
    return 0.5 * (s_text + s_image)
