"""Base class of the loss wrappers (XBM, CCP, ZSR, XML, Metrix with MoCHi and i-Mix, Proxy
Synthesis), each adding its own term to a ``base`` loss (Gürbüz thesis §3.3.2.1, Algorithm 1,
Eqs. 5.2.4-5.2.5; XML paper Eq. 2.11; Psomas thesis Eq. 2.10)::

    XBM:     L = base(batch, batch) + w base(batch, memory)
    CCP:     L = proxy_weight base(proxies, batch) + batch_weight base(batch, batch)
    ZSR/XML: L = (1 - lambda) base(embeddings) + lambda L_extra
    Metrix:  E = base.clean + w base.mixed   (MoCHi and i-Mix: other pairs, labels, anchors)
    PS:      L = base(batch + synthetic embeddings, proxies + synthetic proxies)

A bad option is reported at ``loss.<option>`` (``loss.base.<option>`` for the wrapped loss's).
"""

from __future__ import annotations

from typing import Any, Optional

from torch import nn

from gspdml.errors import ConfigError
from gspdml.losses.base import LOSSES, MetricLoss, build_loss
from gspdml.losses.requirements import BatchRequirements, requirements_of
from gspdml.registry import Registry


class LossWrapper(MetricLoss):
    """A loss around ``self.base``, built from the spec in option ``base_option`` (``base``;
    Metrix's ``loss``) from the registry in ``nested``.

    Args:
        base: the spec of the wrapped loss (any registered loss, ``{name: ..., options}``).
    """

    base_option = "base"
    nested: dict[str, Registry] = {"base": LOSSES}

    def __init__(self, base: Any, embedding_dim: Optional[int], num_classes: Optional[int]) -> None:
        super().__init__()
        if not isinstance(base, nn.Module):
            field = self.field(self.base_option)
            base = build_loss(base, field, embedding_dim=embedding_dim, num_classes=num_classes)
        self.base = base

    def batch_requirements(self) -> BatchRequirements:
        """The wrapper's own requirements and its base loss's."""
        return self.requires.combine(requirements_of(self.base))

    @staticmethod
    def field(option: str) -> str:
        """The dotted config field of one of the wrapper's options: ``loss.<option>``."""
        return f"loss.{option}"

    def require(self, ok: bool, option: str, message: str) -> None:
        """Raise a :class:`ConfigError` naming ``loss.<option>`` unless ``ok``."""
        if not ok:
            raise ConfigError(self.field(option), message)

    def require_choice(self, option: str, value: Any, allowed: tuple[str, ...]) -> None:
        """``value`` must be one of ``allowed``; the error lists them."""
        self.require(
            value in allowed, option, f"unknown value {value!r}; allowed: {', '.join(allowed)}"
        )

    def require_base(self, kind: type, description: str) -> None:
        """The built ``base`` must be a ``kind`` (e.g. XBM and CCP need a pair loss)."""
        self.require(
            isinstance(self.base, kind),
            self.base_option,
            f"must be {description}, got {type(self.base).__name__}",
        )

    def require_positive(self, option: str, value: float) -> float:
        """``value`` must be ``> 0`` (a ridge weight, a logit scale)."""
        self.require(value > 0.0, option, f"must be positive, got {value}")
        return float(value)

    def require_mixing(self, mixing: float) -> float:
        """``lambda`` of ``(1 - lambda) base + lambda L_extra`` must lie in ``[0, 1]``."""
        self.require(
            0.0 <= mixing <= 1.0,
            "mixing",
            f"the mixing weight lambda must be in [0, 1], got {mixing}",
        )
        return float(mixing)
