"""The attention map of a released ViT over its patches (Psomas thesis §3.4.3, "Object
localisation" and "Unsupervised object discovery"; Fig. 3.4's maps): for the Baseline the
attention of the [CLS] token over the patch tokens in the last block's self-attention (one head,
or their mean), for SimPool its attention ``a`` over the patch tokens (Eq. 3.65,
:class:`~gspdml.pooling.simpool.SimPool`'s ``weights``).

The image may have any size that is a multiple of the patch: the position embeddings of the
patches are interpolated bicubically to its grid as DINO does (Caron et al., ICCV 2021, its
``interpolate_pos_encoding``: scale factors ``(grid' + 0.1) / grid``), the [CLS] entry kept. The
last block's attention is ``softmax(q k^T / sqrt(d_h))`` of its ``norm1``-ed input, per head
(Dosovitskiy et al., ICLR 2021, Eq. 5); its keys are LOST's features
(:func:`last_block_keys`).
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import nn

from gspdml.errors import ConfigError
from gspdml.models.embedder import Embedder
from gspdml.models.released_vit import ReleasedViT


def _positions(vit: ReleasedViT, rows: int, cols: int) -> torch.Tensor:
    """The position embeddings for a ``rows x cols`` grid (module doc)."""
    grid, prefix = vit.shape.grid, int(vit.shape.class_token)
    if (rows, cols) == (grid, grid):
        return vit.pos_embed
    patches = vit.pos_embed[:, prefix:].reshape(1, grid, grid, -1).permute(0, 3, 1, 2)
    scale = ((rows + 0.1) / grid, (cols + 0.1) / grid)
    resized = nn.functional.interpolate(patches, scale_factor=scale, mode="bicubic")
    if tuple(resized.shape[-2:]) != (rows, cols):
        raise ValueError(f"interpolated grid {tuple(resized.shape[-2:])}, expected {(rows, cols)}")
    flat = resized.permute(0, 2, 3, 1).reshape(1, rows * cols, -1)
    return torch.cat([vit.pos_embed[:, :prefix], flat], dim=1)


def last_block_input(vit: ReleasedViT, images: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """The tokens entering the last block (the [CLS] token first where the ViT has one) and the
    patch grid ``rows, cols`` of ``images`` (each side a multiple of the patch)."""
    patch = vit.shape.patch
    height, width = images.shape[-2:]
    if height % patch or width % patch:
        raise ValueError(f"image {height} x {width} is not a multiple of the {patch}-pixel patch")
    rows, cols = height // patch, width // patch
    tokens = vit.patch_embed(images)
    if vit.cls_token is not None:
        tokens = torch.cat([vit.cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)
    tokens = tokens + _positions(vit, rows, cols)
    blocks = list(vit.blocks)
    for block in blocks[:-1]:
        tokens = block(tokens)
    return tokens, rows, cols


def self_attention(block: Any, tokens: torch.Tensor) -> torch.Tensor:
    """The attention ``[B, heads, N, N]`` of a timm block's self-attention on ``tokens``."""
    attn = block.attn
    x = block.norm1(tokens)
    batch, count, _ = x.shape
    qkv = attn.qkv(x).reshape(batch, count, 3, attn.num_heads, attn.head_dim)
    q, k, _ = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    q, k = attn.q_norm(q), attn.k_norm(k)
    return torch.softmax((q * attn.scale) @ k.transpose(-2, -1), dim=-1)


def last_block_keys(model: Embedder, images: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """The keys ``[B, patches, width]`` (heads concatenated) of the patch tokens in the last
    block's self-attention, LOST's features, and the patch grid ``rows, cols``."""
    vit = released_vit(model)
    tokens, rows, cols = last_block_input(vit, images)
    block: Any = list(vit.blocks)[-1]
    attn = block.attn
    qkv = attn.qkv(block.norm1(tokens)).reshape(*tokens.shape[:2], 3, attn.num_heads, -1)
    keys = attn.k_norm(qkv[:, :, 1].transpose(1, 2)).transpose(1, 2).flatten(2)
    return keys[:, int(vit.shape.class_token) :], rows, cols


def released_vit(model: Embedder) -> ReleasedViT:
    """The released ViT of ``model``, or a ConfigError: attention maps are read from one."""
    if not isinstance(model.backbone, ReleasedViT):
        raise ConfigError("model", "attention maps are read from a released ViT (backbone vit)")
    return model.backbone


def patch_attention(
    model: Embedder, images: torch.Tensor, head: Optional[int] = None
) -> torch.Tensor:
    """The attention map ``[B, rows, cols]`` of a released ViT embedder (module doc): its
    SimPool's attention, or for a [CLS] model the [CLS] token's attention in the last block,
    of head ``head`` (0-based) or averaged over the heads (None)."""
    vit = released_vit(model)
    tokens, rows, cols = last_block_input(vit, images)
    last = vit.blocks[-1]
    if vit.output == "cls":
        attention = self_attention(last, tokens)[:, :, 0, 1:]  # [B, heads, patches]
        heads = attention.shape[1]
        if head is not None and not 0 <= head < heads:
            raise ConfigError("head", f"this ViT has heads 0..{heads - 1}, got {head}")
        maps = attention.mean(dim=1) if head is None else attention[:, head]
        return maps.reshape(-1, rows, cols)
    out = last(tokens)[:, int(vit.shape.class_token) :]
    if vit.norm is not None:
        out = vit.norm(out)
    weights: Optional[torch.Tensor] = model.pooling(out).weights
    if weights is None:
        raise ConfigError("model", "this pooling returns no attention over the patches")
    return weights.reshape(-1, rows, cols)
