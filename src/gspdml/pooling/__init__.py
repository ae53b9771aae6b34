"""Pooling layers: local features ``[B, C, H, W]`` (or tokens ``[B, N, C]``) to ``[B, C]``.

Every layer is registered in :data:`POOLINGS` under its config name.
"""

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, build_pooling, flatten_locations
from gspdml.pooling import simple  # noqa: F401  (registers gap, gmp)
from gspdml.pooling.gsp import GSP  # noqa: F401  (registers gsp)
from gspdml.pooling.partial_transport import partial_transport, partial_transport_lp  # noqa: F401

__all__ = ["POOLINGS", "Pooled", "Pooling", "build_pooling", "flatten_locations"]
