"""Bags of trainable tokens: the synthetic study of the GSP paper (§5.1 and
supplement §2.1; Gürbüz thesis §5.3.1).

A vocabulary holds ``num_classes x tokens_per_class`` class tokens followed by
``shared_tokens`` background tokens shared by all classes (default 16 x 4 + 4 = 68). A sample
of class ``c`` is a bag of ``bag_size`` (50) token indices: draw the mixing ratio
``mu~ ~ N(ratio_mean, ratio_std^2)`` (N(0.5, 0.1^2)), take ``n_fg = round(bag_size mu~)``
(clipped to ``[1, bag_size - 1]``) tokens uniformly with replacement from class ``c``'s tokens
and the remaining ones from the shared tokens (GSP paper supplement §2.1: mu~ = 0.4 gives 20 class tokens
and 30 shared ones). Looking the indices up in a trainable ``[V, d]`` table gives the local
features ``[B, bag_size, d]`` of a pooling layer, mimicking a CNN's output.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gspdml.errors import ConfigError


@dataclass(frozen=True)
class TokenVocabulary:
    """Index layout: class ``c`` owns ``[c k, (c + 1) k)``, ``k = tokens_per_class``; the shared
    tokens come last."""

    num_classes: int = 16
    tokens_per_class: int = 4
    shared_tokens: int = 4

    def __post_init__(self) -> None:
        for field in ("num_classes", "tokens_per_class", "shared_tokens"):
            if getattr(self, field) < 1:
                raise ConfigError(field, f"must be >= 1, got {getattr(self, field)}")

    @property
    def size(self) -> int:
        return self.num_classes * self.tokens_per_class + self.shared_tokens

    def is_shared(self, index: torch.Tensor) -> torch.Tensor:
        """True where a token index is a shared (background) token."""
        return index >= self.num_classes * self.tokens_per_class

    def token_class(self, index: torch.Tensor) -> torch.Tensor:
        """Class owning each token index, ``-1`` for shared tokens."""
        owner = torch.div(index, self.tokens_per_class, rounding_mode="floor")
        return torch.where(self.is_shared(index), torch.full_like(index, -1), owner)


@dataclass
class TokenBags:
    tokens: torch.Tensor  # [S, bag_size] int64 vocabulary indices
    labels: torch.Tensor  # [S] int64 classes
    foreground: torch.Tensor  # [S, bag_size] bool, True for class tokens


def sample_token_bags(
    vocabulary: TokenVocabulary,
    labels: torch.Tensor,
    *,
    bag_size: int = 50,
    ratio_mean: float = 0.5,
    ratio_std: float = 0.1,
    generator: torch.Generator | None = None,
) -> TokenBags:
    """One bag per entry of ``labels`` (see the module docstring); class tokens come first in
    each bag (the order is irrelevant to the poolings that use it)."""
    if bag_size < 2:
        raise ConfigError(
            "bag_size", f"a bag needs at least one class and one shared token, got {bag_size}"
        )
    labels = torch.as_tensor(labels, dtype=torch.long)
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= vocabulary.num_classes):
        raise ConfigError(
            "labels", f"classes must be in [0, {vocabulary.num_classes}), got {labels.tolist()}"
        )
    s = labels.numel()
    ratio = ratio_mean + ratio_std * torch.randn(s, generator=generator)
    n_fg = torch.round(bag_size * ratio).long().clamp(1, bag_size - 1)  # [S]
    foreground = torch.arange(bag_size)[None, :] < n_fg[:, None]  # [S, bag_size]
    k = vocabulary.tokens_per_class
    class_pick = labels[:, None] * k + torch.randint(k, (s, bag_size), generator=generator)
    shared_pick = vocabulary.num_classes * k + torch.randint(
        vocabulary.shared_tokens, (s, bag_size), generator=generator
    )
    return TokenBags(torch.where(foreground, class_pick, shared_pick), labels, foreground)
