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
        weights: spatial pooling weights ``[B, H, W]`` (``[B, N]`` for tokens) of the poolings that
            have them (GSP, SimPool, attention poolings).
        attributes: pseudo-attributes ``[B, m]`` (GSP's ``z = pi 1 / mu``, GSP paper Eq. 4.3).
        local: the local features the pooling consumed (after the 1x1 head), read by XML.
        pooled: the pooled vector before normalisation ``[B, D]``.
    """

    embedding: torch.Tensor
    weights: Optional[torch.Tensor] = None
    attributes: Optional[torch.Tensor] = None
    local: Optional[torch.Tensor] = None
    pooled: Optional[torch.Tensor] = None
