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

import inspect
from typing import Any, Optional

from torch import nn

from gspdml.errors import ConfigError
from gspdml.losses.base import LOSSES, MetricLoss, build_loss
from gspdml.losses.requirements import BatchRequirements, requirements_of
from gspdml.registry import Registry, parse_spec
from gspdml.typecheck import Refusal


class LossWrapper(MetricLoss):
    """A loss around ``self.base``, built from the spec in option ``base_option`` (``base``;
    Metrix's ``loss``) from the registry in ``nested``.

    Args:
        base: the spec of the wrapped loss (any registered loss, ``{name: ..., options}``).
    """

    base_option = "base"
    nested: dict[str, Registry] = {"base": LOSSES}
    #: the kind of loss ``base`` must be, in classes and words (XBM and CCP need a pair loss)
    base_kind: Optional[tuple[type, str]] = None

    @classmethod
    def check_options(cls, **options: Any) -> Refusal:
        """``base`` (a spec, or a built loss) must be a :attr:`base_kind`, checked before a build."""
        base = options.get(cls.base_option)
        if cls.base_kind is None or base is None:
            return None
        if isinstance(base, nn.Module):
            base = type(base)
        else:  # a spec; an unknown name is the registry's to report
            name = parse_spec(base, cls.field(cls.base_option))[0]
            base = LOSSES.get(name) if name in LOSSES else None
        kind, words = cls.base_kind
        if not inspect.isclass(base) or issubclass(base, kind):
            return None
        return cls.base_option, f"must be {words}, got {base.__name__}"

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
