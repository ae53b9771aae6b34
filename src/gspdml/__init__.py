"""gspdml: deep metric learning with Generalized Sum Pooling and friends.

The flow of one image (see docs/design.md): backbone -> local 1x1 head -> pooling -> L2-normalise,
all inside :class:`gspdml.models.Embedder`, whose forward returns an
:class:`gspdml.models.EmbedderOutput`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gspdml.version import __version__

if TYPE_CHECKING:
    from gspdml.retrieval.bundle import BundledEncoder

__all__ = ["__version__", "from_pretrained"]


def from_pretrained(
    name_or_path: str | Path, device: str = "cpu", **hub_options: Any
) -> BundledEncoder:
    """A ready encoder from a bundle folder written by ``gspdml bundle`` or a hub repository
    (see :func:`gspdml.retrieval.bundle.from_pretrained`)."""
    from gspdml.retrieval.bundle import from_pretrained as load

    return load(name_or_path, device, **hub_options)
