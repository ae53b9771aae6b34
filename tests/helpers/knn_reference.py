"""The reference the kNN tests compare with: exhaustive float64 search."""

import torch


def brute_force(query, reference, k):
    """Full float64 distance matrix, stable sort (ties keep index order), first k columns."""
    q = query.double()
    r = q if reference is None else reference.double()
    d = ((q[:, None, :] - r[None, :, :]) ** 2).sum(-1)
    if reference is None:
        d.fill_diagonal_(float("inf"))
    order = torch.sort(d, dim=1, stable=True).indices[:, :k]
    return d.gather(1, order), order
