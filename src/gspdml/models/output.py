"""What an :class:`~gspdml.models.Embedder` returns, so that losses, regularisers and
visualisations never recompute the forward pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class EmbedderOutput:
    """One forward pass of the embedder.

    Attributes:
        embedding: global embedding ``[B, D]`` (L2-normalised when the embedder normalises).
        weights: spatial pooling weights ``[B, H, W]`` (``[B, N]`` for token inputs) when the
            pooling has them (GSP, SimPool, attention poolings); rows sum to one where they are
            a distribution.
        attributes: per-sample pseudo-attributes ``[B, m]`` (GSP's ``z = pi 1 / mu``, GSP paper
            Eq. 4.3), read by the zero-shot regulariser.
        local: the local features the pooling consumed, ``[B, D, H, W]`` (after the 1x1 head),
            read by losses that build their own histograms (XML).
        pooled: the pooled vector before normalisation ``[B, D]``.
    """

    embedding: torch.Tensor
    weights: Optional[torch.Tensor] = None
    attributes: Optional[torch.Tensor] = None
    local: Optional[torch.Tensor] = None
    pooled: Optional[torch.Tensor] = None
