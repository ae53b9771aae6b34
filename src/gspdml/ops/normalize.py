"""Clip normalisation, the projection onto the unit ball (GSP paper §4.1; Gürbüz thesis §3.2.4)::

    clip(u) = u / max(1, ||u||_2)

GSP measures its costs between clipped prototypes and features; CCP (and the embedder with
``model.normalize: clip``) trains and evaluates clipped embeddings and proxies.
"""

from __future__ import annotations

import torch


def clip_normalize(u: torch.Tensor) -> torch.Tensor:
    """``u / max(1, ||u||_2)`` along the last dimension: projection onto the unit ball (GSP paper §4.1)."""
    projected: torch.Tensor = u / u.norm(dim=-1, keepdim=True).clamp_min(1.0)
    return projected
