"""What a model declares so that a trainer can hold its backbone still.

The trainer reads of a model's backbone whether it is frozen
(:meth:`~gspdml.models.backbones.base.Backbone.freeze`), its parameters (no gradient in the
warm-up; the ``backbone_gap`` baseline scores its average-pooled features) and its feature
cache (``model.cache_backbone_features``). :class:`~gspdml.models.embedder.Embedder` declares
them, a user's model may too; one that does not is trained as one piece (no warm-up, no
backbone baseline).
"""

from __future__ import annotations

from typing import Optional, Protocol, runtime_checkable

from torch import nn

from gspdml.models.feature_cache import FeatureCache


@runtime_checkable
class Freezable(Protocol):
    """A model with a declared backbone (module docstring)."""

    #: the feature extractor (its parameters: ``backbone.parameters()``)
    backbone: nn.Module
    #: the memoised maps of a frozen backbone, or None
    feature_cache: Optional[FeatureCache]

    @property
    def backbone_frozen(self) -> bool:
        """Whether the backbone is in the frozen regime: no parameter of it ever trains."""
        ...
