"""The report's map of the test embeddings: t-SNE (van der Maaten & Hinton 2008) to two
dimensions, one dot per image coloured by its class.

At most :data:`MAX_POINTS` images are mapped (a seeded sample beyond that); scikit-learn's
``TSNE`` with PCA initialisation, the report's seed, and a perplexity of
``min(30, (n - 1) / 3)`` (t-SNE needs fewer than ``3 * perplexity + 1`` points otherwise). The
map shows neighbourhoods, not distances between far clusters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from gspdml.retrieval.figures import _matplotlib, figure_svg

MAX_POINTS = 1000
PERPLEXITY = 30.0


def tsne_points(
    vectors: np.ndarray, seed: int = 0, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the mapped rows, their 2-D t-SNE coordinates); empty for fewer than 4 rows."""
    from sklearn.manifold import TSNE

    x = np.asarray(vectors, dtype=np.float64)
    n = len(x)
    if n < 4:
        return np.arange(0), np.zeros((0, 2))
    rows = np.arange(n)
    if n > max_points:
        rows = np.sort(np.random.default_rng(seed).choice(n, max_points, replace=False))
    perplexity = min(PERPLEXITY, (len(rows) - 1) / 3)
    tsne = TSNE(n_components=2, init="pca", random_state=seed, perplexity=perplexity)
    return rows, tsne.fit_transform(x[rows])


def embedding_map_svg(vectors: np.ndarray, labels: Sequence[Optional[Any]], seed: int = 0) -> str:
    """Inline SVG of :func:`tsne_points`, coloured by label (grey without labels); empty
    string when there are too few images."""
    rows, points = tsne_points(vectors, seed)
    if not len(rows):
        return ""
    Figure, colormaps = _matplotlib()
    names = [labels[i] for i in rows]
    classes = {name: k for k, name in enumerate(dict.fromkeys(map(str, names)))}
    colours = [classes[str(name)] for name in names]
    figure = Figure(figsize=(5.0, 4.6))
    axes = figure.add_subplot(1, 1, 1)
    axes.scatter(points[:, 0], points[:, 1], c=colours, cmap=colormaps["tab20"], s=9)
    axes.set_title(f"t-SNE of {len(rows)} test embeddings ({len(classes)} classes)")
    axes.set_xticks([])
    axes.set_yticks([])
    figure.tight_layout()
    return figure_svg(figure)
