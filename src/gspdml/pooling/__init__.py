"""Pooling layers: local features ``[B, C, H, W]`` (or tokens ``[B, N, C]``) to ``[B, C]``.

Every layer is registered in :data:`POOLINGS` under its config name.
"""

from gspdml.pooling import (  # noqa: F401  (gap_gmp, kmax, weldon, gem, lse, gemax)  # noqa: F401  (attention and re-weighting poolings)  # noqa: F401  (prototype ensembles: clusters x dim outputs)  # noqa: F401  (SimPool chapter)
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
    simple,  # noqa: F401  (registers gap, gmp)
    simpool,
    slot_attention,
    solar,
)
from gspdml.pooling.base import POOLINGS, Pooled, Pooling, build_pooling, flatten_locations
from gspdml.pooling.gsp.layer import GSP  # noqa: F401  (registers gsp)

__all__ = [
    "GSP",
    "POOLINGS",
    "Pooled",
    "Pooling",
    "build_pooling",
    "flatten_locations",
]
