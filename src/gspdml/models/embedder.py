"""The embedder: backbone -> local 1x1 head -> pooling -> L2-normalise (DESIGN.md)."""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.models.backbones import build_backbone
from gspdml.models.output import EmbedderOutput
from gspdml.pooling import build_pooling


class LocalHead(nn.Conv2d):
    """The 1x1 "local embedding" convolution; on token sequences ``[B, N, C]`` (ViT) it is the
    same linear map applied to every token."""

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size=1, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:
            return F.linear(x, self.weight.flatten(1), self.bias)
        return super().forward(x)


HEAD_POSITIONS = ("local", "global")
POOLED_NORMS = (None, "layer_norm")


class Embedder(nn.Module):
    """Maps images to global embeddings.

    With ``head: local`` (the default) the head is a 1x1 convolution from the backbone's channels
    to ``embedding_dim`` applied to every location *before* pooling (seed 004 L1212: the "local
    embedding"); for linear poolings (GAP) this equals pooling followed by a linear layer, and GSP
    needs it so that its transport costs live in embedding space. With ``head: global`` a linear
    ``projection`` follows pooling instead (ProxyNCA++, seed 002 §3: global max pooling, then a
    layer norm without affine parameters (``pooled_norm: layer_norm``), then the embedding layer).
    ``embedding_dim=None`` keeps the backbone width.

    The parts are attributes ``backbone``, ``head``, ``pooling``, ``pooled_norm`` and
    ``projection``; the trainer builds optimiser groups (and the warm-up of the new layers) from
    these names.
    """

    def __init__(
        self,
        backbone: nn.Module,
        pooling: nn.Module,
        head: Optional[nn.Module] = None,
        normalize: bool = True,
        pooled_norm: Optional[nn.Module] = None,
        projection: Optional[nn.Linear] = None,
    ):
        super().__init__()
        self.backbone, self.pooling = backbone, pooling
        self.head = head if head is not None else nn.Identity()
        self.pooled_norm = pooled_norm if pooled_norm is not None else nn.Identity()
        self.projection = projection if projection is not None else nn.Identity()
        self.normalize = normalize

    def forward(self, images: torch.Tensor) -> EmbedderOutput:
        return self.embed_features(self.backbone(images))

    def embed_features(self, maps: torch.Tensor) -> EmbedderOutput:
        """Everything after the backbone (head, pooling, normalisation) on backbone feature maps;
        feature-level mixup calls it on mixed maps."""
        local = self.head(maps)
        pooled = self.pooling(local)
        vector = self.projection(self.pooled_norm(pooled.vector))
        embedding = F.normalize(vector.float(), dim=1) if self.normalize else vector
        return EmbedderOutput(embedding, pooled.weights, pooled.attributes, local, vector)

    @property
    def embedding_dim(self) -> int:
        if isinstance(self.projection, nn.Linear):
            return self.projection.out_features
        return self.pooling.out_channels()


def build_embedder(model: dict[str, Any], in_channels: int) -> Embedder:
    """Build from the ``model`` section of a config (see :mod:`gspdml.config`)."""
    backbone = build_backbone(model["backbone"], in_channels)
    dim = model.get("embedding_dim")
    position = model.get("head", "local")
    bias = bool(model.get("head_bias", True))
    head = projection = pooled_norm = None
    local_dim = backbone.out_channels
    if dim and position == "local":
        head = LocalHead(backbone.out_channels, int(dim), bias=bias)
        local_dim = int(dim)
    pooling = build_pooling(model["pooling"], in_channels=local_dim)
    if model.get("pooled_norm") == "layer_norm":
        pooled_norm = nn.LayerNorm(pooling.out_channels(), elementwise_affine=False)
    if dim and position == "global":
        projection = nn.Linear(pooling.out_channels(), int(dim), bias=bias)
    return Embedder(backbone, pooling, head, bool(model.get("normalize", True)), pooled_norm, projection)
