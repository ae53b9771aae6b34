"""Pooling layers: local features ``[B, C, H, W]`` (or tokens ``[B, N, C]``) to ``[B, C]``.

Every layer is registered in :data:`POOLINGS` under its config name.
"""

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, build_pooling, flatten_locations
from gspdml.pooling import simple  # noqa: F401  (registers gap, gmp)
from gspdml.pooling.gsp.layer import GSP  # noqa: F401  (registers gsp)
from gspdml.pooling import order_statistics, power_means, generalized_max  # noqa: F401  (gap_gmp, kmax, weldon, gem, lse, gemax)
from gspdml.pooling import crow, delf, cbam, gsop, solar, how  # noqa: F401  (attention and re-weighting poolings)
from gspdml.pooling import netvlad, otp  # noqa: F401  (prototype ensembles: clusters x dim outputs)
from gspdml.pooling import simpool, slot_attention, class_attention  # noqa: F401  (SimPool chapter)

__all__ = [
    "GSP", "POOLINGS", "Pooled", "Pooling", "build_pooling", "flatten_locations",
]
