"""The embedder: backbone -> local 1x1 head -> pooling -> L2-normalise (docs/design.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, Union, cast

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.errors import ConfigError
from gspdml.models.backbones import Backbone, build_backbone
from gspdml.models.feature_cache import SHARED, FeatureCache
from gspdml.models.output import EmbedderOutput
from gspdml.ops.normalize import clip_normalize
from gspdml.pooling import POOLINGS, Pooling, build_pooling
from gspdml.settings.sections import FROZEN_ONLY, ModelConfig


class LocalHead(nn.Conv2d):
    """The 1x1 "local embedding" convolution; on token sequences ``[B, N, C]`` (ViT) it is the
    same linear map applied to every token."""

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True):
        super().__init__(in_channels, out_channels, kernel_size=1, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:
            return self.project_vectors(x)
        return super().forward(x)

    def project_vectors(self, vectors: torch.Tensor) -> torch.Tensor:
        """The same map on vectors ``[..., C]`` (e.g. a pooled backbone map), in their dtype."""
        bias = self.bias.to(vectors.dtype) if self.bias is not None else None
        return F.linear(vectors, self.weight.flatten(1).to(vectors.dtype), bias)


class Embedder(nn.Module):
    """Maps images to global embeddings.

    Two placements of the projection to ``embedding_dim`` (``model.head``):

    * ``global``: pool the backbone map, then a linear ``projection`` of the pooled vector, as the
      papers' baselines do (the GSP authors' TF ``GlobalPooling`` and ``GMeanP``; Metrix, Psomas
      thesis §2.4.1: GAP+GMP; ProxyNCA++ paper §3: GMP and a non-affine LayerNorm, ``pooled_norm:
      layer_norm``).
    * ``local``: a 1x1 convolution ``head`` on every location, then pooling (Gürbüz thesis §5.2.4,
      the "local embedding"); GSP needs it, its transport costs live in embedding space.

    The two agree for a linear pooling (GAP) and differ for max-like and power poolings.
    ``model.head: null`` takes the pooling's :attr:`~gspdml.pooling.base.Pooling.head_placement`.
    ``embedding_dim=None`` keeps the backbone width. ``normalize``: ``true`` L2-normalises, ``clip``
    maps to ``v / max(1, ||v||)`` (CCP's unit ball, Gürbüz thesis §3.2.4), ``false`` leaves it.

    A pooling that reads the backbone map too (GSP's ``add_max_pool``, GeMean+GSP) gets
    ``pooling(head(F), source=F, project=head)``. ``feature_cache``
    (:class:`~gspdml.models.feature_cache.FeatureCache`, frozen backbones only) reads the maps of
    images seen before. The trainer builds optimiser groups from the part names ``backbone``,
    ``head``, ``pooling``, ``pooled_norm`` and ``projection``."""

    #: the EmbedderOutput fields it always fills besides ``embedding`` (its pooling declares the
    #: rest), and ``embed_features``: backbone maps can be embedded on their own (Metrix mixes them)
    provides = frozenset({"local", "pooled", "embed_features"})

    def __init__(
        self,
        backbone: nn.Module,
        pooling: Pooling,
        head: Optional[nn.Module] = None,
        normalize: Union[bool, str] = True,
        pooled_norm: Optional[nn.Module] = None,
        projection: Optional[nn.Linear] = None,
        feature_cache: Optional[FeatureCache] = None,
    ):
        super().__init__()
        self.backbone, self.pooling = backbone, pooling
        if feature_cache is not None and not self.backbone_frozen:
            raise ConfigError("model.cache_backbone_features", FROZEN_ONLY)
        self.head = head if head is not None else nn.Identity()
        self.pooled_norm = pooled_norm if pooled_norm is not None else nn.Identity()
        self.projection = projection if projection is not None else nn.Identity()
        self.normalize = normalize
        self.feature_cache = feature_cache

    def forward(self, images: torch.Tensor) -> EmbedderOutput:
        maps = (
            self.backbone(images)
            if self.feature_cache is None
            else self.feature_cache(self.backbone, images)
        )
        return self.embed_features(maps)

    def embed_features(self, maps: torch.Tensor) -> EmbedderOutput:
        """Everything after the backbone (head, pooling, normalisation) on backbone feature maps;
        feature-level mixup calls it on mixed maps."""
        local = self.head(maps)
        if isinstance(self.head, LocalHead) and getattr(self.pooling, "reads_backbone_map", bool)():
            pooled = self.pooling(local, source=maps, project=self.head.project_vectors)
        else:
            pooled = self.pooling(local)
        vector = self.projection(self.pooled_norm(pooled.vector))
        # normalised in at least float32 (bf16/fp16 autocast upcast; float64 stays float64)
        wide = vector.to(torch.promote_types(vector.dtype, torch.float32))
        if self.normalize == "clip":
            embedding = clip_normalize(wide)
        else:
            embedding = F.normalize(wide, dim=1) if self.normalize else vector
        return EmbedderOutput(embedding, pooled.weights, pooled.attributes, local, vector)

    @property
    def backbone_frozen(self) -> bool:
        """Whether the backbone is in the frozen regime (:meth:`Backbone.freeze`)."""
        return isinstance(self.backbone, Backbone) and self.backbone.is_frozen

    @property
    def embedding_dim(self) -> int:
        if isinstance(self.projection, nn.Linear):
            return self.projection.out_features
        return self.pooling.out_channels()


def model_section(model: ModelConfig | Mapping[str, Any]) -> ModelConfig:
    """The typed ``model`` section; a plain mapping (the library's short form, e.g.
    ``{"backbone": "small_cnn", "pooling": "gap"}``) is checked by the run schema, and without
    ``embedding_dim`` it has no head (the pooled channels are the embedding)."""
    if isinstance(model, ModelConfig):
        return model
    return ModelConfig.from_mapping({"embedding_dim": None, **model}, "model")


def build_embedder(model: ModelConfig | Mapping[str, Any], in_channels: int) -> Embedder:
    """Build from the ``model`` section of a config (see :mod:`gspdml.config`)."""
    section = model_section(model)
    backbone = build_backbone(section.backbone, in_channels)
    dim = section.embedding_dim
    position = head_position(section)
    head = projection = pooled_norm = None
    local_dim = backbone.out_channels
    if dim and position == "local":
        head = LocalHead(backbone.out_channels, dim, bias=section.head_bias)
        local_dim = dim
    pooling = build_pooling(section.pooling, in_channels=local_dim)
    if section.pooled_norm == "layer_norm":
        pooled_norm = nn.LayerNorm(pooling.out_channels(), elementwise_affine=False)
    if dim and position == "global":
        projection = nn.Linear(pooling.out_channels(), dim, bias=section.head_bias)
    cache = SHARED if section.cache_backbone_features else None
    return Embedder(backbone, pooling, head, section.normalize, pooled_norm, projection, cache)


def head_position(model: ModelConfig | Mapping[str, Any]) -> str:
    """``model.head`` when it is named, else the placement of the configured pooling (see
    :class:`Embedder`)."""
    section = model_section(model)
    if section.head is not None:
        return section.head
    return cast(type[Pooling], POOLINGS.get(section.pooling_name)).head_placement
