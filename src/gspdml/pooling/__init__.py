"""Pooling layers: local features ``[B, C, H, W]`` (or tokens ``[B, N, C]``) to ``[B, C]``.

Every layer is registered in :data:`POOLINGS` under its config name.
"""

from gspdml.pooling import (  # noqa: F401  (each module registers its poolings on import)
    cbam,
    class_attention,
    crow,
    delf,
    generalized_max,
    gsop,
    how,
    netvlad,
    order_statistics,
    otp,
    power_means,
    simple,
    simpool,
    slot_attention,
    solar,
)
from gspdml.pooling.base import POOLINGS, Pooled, Pooling, build_pooling, flatten_locations
from gspdml.pooling.gsp.layer import GSP  # noqa: F401  (registers gsp)

__all__ = ["GSP", "POOLINGS", "Pooled", "Pooling", "build_pooling", "flatten_locations"]
