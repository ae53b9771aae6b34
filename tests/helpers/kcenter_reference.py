"""Greedy k-center (Gürbüz thesis Algorithm 2) written as plain loops, the independent reference of the
CCP proxy-selection and controller tests."""

from __future__ import annotations

import math


def kcenter_reference(pool, old, k):
    """Indices of ``k`` rows of ``pool`` picked farthest-first from the centres ``old`` and the
    rows picked so far (ties to the lowest index)."""
    centres, picked = [list(map(float, v)) for v in old], []
    for _ in range(k):
        best, best_i = -1.0, None
        for i, u in enumerate(pool.tolist()):
            if i in picked:
                continue
            d = min(math.dist(u, v) for v in centres)
            if d > best:
                best, best_i = d, i
        picked.append(best_i)
        centres.append(pool[best_i].tolist())
    return picked
