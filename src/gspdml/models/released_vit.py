"""The SimPool authors' ViT-S/16 (github.com/billpsomas/simpool) as a frozen backbone, in the key
layout of their released checkpoints, so that the files load key for key.

Both releases (the DINO fork and the supervised timm fork) store timm's names: ``patch_embed.proj``,
``cls_token`` (absent from a SimPool model), ``pos_embed`` (per patch, plus [CLS] where there is
one), ``blocks.<i>.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}`` (pre-norm, LayerNorm
eps 1e-6) and the final ``norm``. The forward pass (Dosovitskiy et al., ICLR 2021, Eqs. 1-4)::

    z0 = [x_cls; x_1 E; ..; x_N E] + E_pos        the [CLS] token first, where the model has one
    z_l = MLP(LN(z'_l)) + z'_l,  z'_l = MSA(LN(z_{l-1})) + z_{l-1}
    output: LN(z_L) (``final_norm``) or z_L

``output``: ``cls``, the [CLS] token alone (``[B, 1, C]``, the Baseline of Psomas thesis Table
3.9), or ``tokens``, the patch tokens ``[B, N, C]`` (SimPool's input). The supervised fork
normalises the tokens before SimPool (``final_norm=True``); the DINO fork normalises the pooled
vector (``final_norm=False``; ``norm`` goes to the embedder's ``pooled_norm``,
:mod:`gspdml.models.simpool_release`). Width, depth, patch size and grid are read from a file's
tensors (:func:`vit_shape`); heads = ``width / 64``. The image must have the grid's size (224 x
224 for 14 x 14) unless the model is built ``any_size``: then the patches' position embeddings
are interpolated to the image's grid (bicubic), as DINO's ``interpolate_pos_encoding`` does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from gspdml.errors import DataError
from gspdml.models.backbones.base import Backbone

#: the channels of one attention head in every ViT of the release
HEAD_WIDTH = 64
OUTPUTS = ("cls", "tokens")


@dataclass(frozen=True)
class ViTShape:
    """A ViT's architecture: ``width`` channels, ``depth`` blocks, ``patch`` x ``patch``
    patches on a ``grid`` x ``grid`` layout, with or without a [CLS] token."""

    width: int
    depth: int
    patch: int
    grid: int
    class_token: bool

    @property
    def heads(self) -> int:
        return max(1, self.width // HEAD_WIDTH)


def vit_shape(state: Mapping[str, torch.Tensor], source: str) -> ViTShape:
    """The architecture of the ViT whose weights are ``state`` (the authors' names, module
    doc); a :class:`DataError` naming ``source`` when they are not a ViT's."""
    needed = ("pos_embed", "patch_embed.proj.weight")
    absent = [key for key in needed if key not in state]
    if absent:
        raise DataError(
            f"{source}: not a ViT checkpoint of the SimPool release (no {', '.join(absent)}; "
            f"keys such as {sorted(state)[:4]})"
        )
    weight = state["patch_embed.proj.weight"]
    if weight.dim() != 4 or weight.shape[2] != weight.shape[3] or weight.shape[2] < 1:
        raise DataError(
            f"{source}: patch_embed.proj.weight has shape {list(weight.shape)}; a ViT's is "
            "[width, channels, patch, patch]"
        )
    width, class_token = int(weight.shape[0]), "cls_token" in state
    expected = {"pos_embed": "[1, positions, width]", "cls_token": "[1, 1, width]"}
    for key, layout in expected.items():
        tensor = state.get(key)
        if tensor is not None and (
            tensor.dim() != 3 or tensor.shape[0] != 1 or tensor.shape[2] != width
        ):
            raise DataError(
                f"{source}: {key} has shape {list(tensor.shape)}; this ViT's ({width} channels) "
                f"is {layout}"
            )
    positions = state["pos_embed"].shape[1] - int(class_token)
    grid = math.isqrt(max(positions, 0))
    if positions < 1 or grid * grid != positions:
        raise DataError(f"{source}: {positions} position embeddings are not a square grid")
    blocks = {int(m.group(1)) for key in state if (m := re.match(r"blocks\.(\d+)\.", key))}
    return ViTShape(width, len(blocks), int(weight.shape[-1]), grid, class_token)


class PatchEmbed(nn.Module):
    """The patch embedding ``E``: a ``patch x patch`` convolution with stride ``patch``."""

    def __init__(self, width: int, patch: int, in_channels: int = 3):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, width, kernel_size=patch, stride=patch)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches: torch.Tensor = self.proj(images)
        return patches.flatten(2).transpose(1, 2)


class ReleasedViT(Backbone):
    """The authors' ViT (module doc): ``output`` ``cls`` or ``tokens``, the final LayerNorm
    ``norm`` applied to the tokens when ``final_norm``; ``any_size``: images of any size, the
    position embeddings interpolated to their grid (module doc)."""

    def __init__(self, shape: ViTShape, output: str, final_norm: bool, any_size: bool = False):
        super().__init__()
        if output not in OUTPUTS or (output == "cls" and not shape.class_token):
            raise ValueError(f"output {output!r} of a ViT with class_token={shape.class_token}")
        from gspdml.models.backbones.timm_backbone import import_timm

        block = import_timm().models.vision_transformer.Block
        norm = partial(nn.LayerNorm, eps=1e-6)
        self.shape, self.output, self.any_size = shape, output, any_size
        self.out_channels = shape.width
        self.patch_embed = PatchEmbed(shape.width, shape.patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, shape.width)) if shape.class_token else None
        prefix = int(shape.class_token)
        self.pos_embed = nn.Parameter(torch.zeros(1, shape.grid**2 + prefix, shape.width))
        layers = (
            block(shape.width, shape.heads, mlp_ratio=4.0, qkv_bias=True, norm_layer=norm)
            for _ in range(shape.depth)
        )
        self.blocks = nn.Sequential(*layers)
        self.norm = norm(shape.width) if final_norm else None

    def positions(self, height: int, width: int) -> torch.Tensor:
        """The position embeddings of a ``height x width`` image: the released ones on the
        released grid, else (``any_size``) the patches' interpolated to the image's grid."""
        grid, patch = self.shape.grid, self.shape.patch
        rows, cols = height // patch, width // patch
        if (rows, cols) == (grid, grid):
            return self.pos_embed
        prefix = int(self.shape.class_token)
        patches = self.pos_embed[:, prefix:].reshape(1, grid, grid, -1).permute(0, 3, 1, 2)
        patches = nn.functional.interpolate(patches, size=(rows, cols), mode="bicubic")
        patches = patches.permute(0, 2, 3, 1).reshape(1, rows * cols, -1)
        return torch.cat([self.pos_embed[:, :prefix], patches], dim=1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        size = self.shape.grid * self.shape.patch
        if not self.any_size and tuple(images.shape[-2:]) != (size, size):
            raise ValueError(
                f"this ViT was trained on {size} x {size} images ({self.shape.grid} x "
                f"{self.shape.grid} patches of {self.shape.patch}); got "
                f"{tuple(images.shape[-2:])}: set the crop to {size}"
            )
        tokens: torch.Tensor = self.patch_embed(images)
        if self.cls_token is not None:
            tokens = torch.cat([self.cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)
        tokens = self.blocks(tokens + self.positions(*images.shape[-2:]))
        if self.norm is not None:
            tokens = self.norm(tokens)
        return tokens[:, :1] if self.output == "cls" else tokens[:, int(self.shape.class_token) :]
