"""Proxy selection for CCP: a per-class pool of training samples and greedy k-center over it.

Gürbüz thesis Algorithm 2 "Greedy K-Center Proxy" (§3.2.3; its spurious outer "repeat" dropped):
for each class ``c`` draw ``b`` random samples, embed them with the current network, and add to
the class's proxy set the pool points farthest (greedily) from the converged proxies of ``c``
and from the points already picked, until as many new proxies as old ones are chosen. With
``b`` equal to the number of proxies per class every pool point is taken, which is random
re-initialisation (§3.2.3, §3.3.2.3).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch import Tensor

from gspdml.ops.kcenter import greedy_k_center


def sample_pool(
    labels: np.ndarray,
    num_classes: int,
    pool_size: int,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    """Dataset indices ``[num_classes, pool_size]`` of ``pool_size`` random samples per class.

    Sampling is without replacement; a class with fewer samples than ``pool_size`` is padded
    by sampling its images again (with replacement), so every class has a full pool.
    Raises ``ValueError`` naming the class when a class has no training sample."""
    labels_t = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    order = torch.argsort(labels_t, stable=True)
    counts = torch.bincount(labels_t, minlength=num_classes)
    if len(counts) > num_classes:
        raise ValueError(
            f"training labels go up to {len(counts) - 1} but num_classes is {num_classes}"
        )
    starts = torch.cumsum(counts, 0) - counts
    pool = torch.empty(num_classes, pool_size, dtype=torch.long)
    for c in range(num_classes):
        n = int(counts[c])
        if n == 0:
            raise ValueError(f"class {c} has no training sample; CCP needs at least one per class")
        picks = torch.randperm(n, generator=generator)[:pool_size]
        if n < pool_size:  # padded by drawing the class's samples again
            extra = torch.randint(n, (pool_size - n,), generator=generator)
            picks = torch.cat([picks, extra])
        pool[c] = order[starts[c] + picks]
    return pool


def select_proxies(pool: Tensor, old_proxies: Optional[Tensor], k: int) -> Tensor:
    """Greedy k-center choice of ``k`` new proxies per class from a pool of embeddings.

    Args:
        pool: ``[C, b, D]`` embeddings of the pool (``b >= k``).
        old_proxies: ``[C, k, D]`` converged proxies, the already-placed centres of
            Algorithm 2; None starts each class's traversal at its first pool point.
        k: proxies per class.
    Returns:
        ``[C, k]`` indices into the pool, in selection order.
    """
    num_classes, b, _ = pool.shape
    if b < k:
        raise ValueError(f"pool size {b} is smaller than the number of proxies per class {k}")
    chosen = torch.empty(num_classes, k, dtype=torch.long)
    for c in range(num_classes):
        centres = None if old_proxies is None else old_proxies[c]
        chosen[c] = greedy_k_center(pool[c], k, initial_centers=centres)
    return chosen
