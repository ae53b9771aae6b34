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


def slow_query_scores(x, labels, i, recall_at=(1,), gallery=None, gallery_labels=None):
    """MAP@R, P@1, R-precision and R@K of query i, by a loop over its ranking (squared euclidean
    distance in float64, ties by position; Musgrave et al., "A Metric Learning Reality Check",
    §3.2): leave-one-out over ``x``, or, given ``gallery``, over the gallery; None for a query
    without a relevant item."""
    query = [float(v) for v in x[i]]
    if gallery is None:
        items = [[float(v) for v in row] for row in x]
        item_labels, candidates = labels, [j for j in range(len(labels)) if j != i]
    else:
        items = [[float(v) for v in row] for row in gallery]
        item_labels, candidates = gallery_labels, list(range(len(gallery_labels)))
    distance = {j: sum((a - b) ** 2 for a, b in zip(query, items[j])) for j in candidates}
    ranking = sorted(candidates, key=lambda j: (distance[j], j))
    relevant = [item_labels[j] == labels[i] for j in ranking]
    r = sum(relevant)
    if r == 0:
        return None
    hits, average = 0, 0.0
    for rank, rel in enumerate(relevant[:r], start=1):
        if rel:
            hits += 1
            average += hits / rank
    scores = {
        "map_at_r": average / r,
        "precision_at_1": float(relevant[0]),
        "r_precision": sum(relevant[:r]) / r,
    }
    scores.update({f"recall_at_{K}": float(any(relevant[:K])) for K in recall_at})
    return scores
