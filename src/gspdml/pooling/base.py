"""The pooling interface: every layer maps local features to one vector per image.

Input is a feature map ``[B, C, H, W]`` or a token sequence ``[B, N, C]``; output is a
:class:`Pooled` with the vector ``[B, C]`` (or ``[B, out_dim]`` for poolings that change the
size, e.g. NetVLAD) and, when the method has them, the spatial weights and attributes.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn

from gspdml.registry import Registry

POOLINGS = Registry("pooling", "model.pooling")


@dataclass
class Pooled:
    """Result of a pooling layer: ``vector [B, C]``, optional ``weights`` (``[B, H, W]`` for
    maps, ``[B, N]`` for tokens) and optional ``attributes [B, m]``."""

    vector: torch.Tensor
    weights: Optional[torch.Tensor] = None
    attributes: Optional[torch.Tensor] = None


def flatten_locations(x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``[B, C, H, W] -> ([B, H*W, C], (H, W))`` and ``[B, N, C] -> ([B, N, C], (N,))``."""
    local, spatial = channels_first_locations(x)
    return local.transpose(1, 2), spatial


def channels_first_locations(x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``[B, C, H, W] -> ([B, C, H*W], (H, W))`` and ``[B, N, C] -> ([B, C, N], (N,))``.

    The transpose of :func:`flatten_locations`, a view without a copy: for an NCHW map it is the
    contiguous layout, so reductions over locations and products with ``[*, C]`` matrices read
    memory in order (a ``[B, H*W, C]`` view of an NCHW map makes every one of them strided)."""
    if x.dim() == 4:
        return x.flatten(2), tuple(x.shape[2:])
    if x.dim() == 3:
        return x.transpose(1, 2), (x.shape[1],)
    raise ValueError(f"pooling expects [B, C, H, W] or [B, N, C], got shape {tuple(x.shape)}")


def unflatten_weights(weights: torch.Tensor, spatial: tuple[int, ...]) -> torch.Tensor:
    """``[B, n] -> [B, H, W]`` (or ``[B, N]`` for tokens), the inverse of :func:`flatten_locations`."""
    return weights.reshape(weights.shape[0], *spatial)


class Pooling(nn.Module):
    """Base class. Subclasses implement :meth:`forward` returning :class:`Pooled`.

    ``in_channels`` is supplied by the :class:`~gspdml.models.Embedder` (the local feature
    size), never by the config; ``out_channels(in_channels)`` tells the embedder the output size."""

    supplied_by_caller = ("in_channels",)

    #: Where the embedder's projection goes by default (``model.head: null``): ``"global"`` pools
    #: and then projects, as the papers' baselines do (the GSP authors' TF ``GlobalPooling``);
    #: ``"local"`` projects every location (1x1 convolution) and then pools, for a pooling that
    #: works in embedding space (GSP's transport costs, GSP paper §4).
    head_placement = "global"
    #: the optional :class:`~gspdml.models.EmbedderOutput` fields this pooling fills (``weights``,
    #: ``attributes``); a loss that reads one is refused before training unless the model
    #: declares it
    provides: frozenset[str] = frozenset()

    def __init__(self, in_channels: int):
        super().__init__()
        self.in_channels = in_channels

    def out_channels(self) -> int:
        return self.in_channels

    def forward(self, x: torch.Tensor) -> Pooled:  # pragma: no cover - abstract
        raise NotImplementedError


class LazyInitialised(abc.ABC):
    """A module that finishes its initialisation from the training samples it sees (GSP's
    k-center prototypes). The trainer refuses a run that cannot see :attr:`samples_needed`
    samples by the first evaluation, and calls :meth:`finish_initialisation` by then."""

    @property
    @abc.abstractmethod
    def is_initialised(self) -> bool:
        """Whether the initialisation is finished."""

    @property
    @abc.abstractmethod
    def samples_needed(self) -> int:
        """Training samples that must have been seen for :meth:`finish_initialisation`."""

    @property
    @abc.abstractmethod
    def samples_seen(self) -> int:
        """Training samples seen (and remembered) so far."""

    @abc.abstractmethod
    def finish_initialisation(self) -> int:
        """Initialise now from the samples seen; returns how many were used (0: already done)."""


def build_pooling(
    spec: Mapping[str, Any] | str, in_channels: int, field: str = "model.pooling"
) -> Pooling:
    pooling: Pooling = POOLINGS.build(spec, field, in_channels=in_channels)
    return pooling
