"""The report's t-SNE map: scikit-learn's TSNE with the documented settings, on a seeded sample
beyond MAX_POINTS; drawn as an SVG with one dot per mapped image."""

from __future__ import annotations

import numpy as np
from sklearn.manifold import TSNE

from gspdml.retrieval.embedding_map import embedding_map_svg, tsne_points


def test_tsne_points_are_sklearns_tsne_with_the_documented_settings():
    x = np.random.default_rng(0).normal(size=(40, 8))
    rows, points = tsne_points(x, seed=3)
    expected = TSNE(n_components=2, init="pca", random_state=3, perplexity=13.0).fit_transform(x)
    assert rows.tolist() == list(range(40))
    np.testing.assert_allclose(points, expected, rtol=1e-6, atol=1e-6)
    rows, points = tsne_points(x, seed=3, max_points=20)
    assert len(rows) == 20 == len(set(rows.tolist())) and points.shape == (20, 2)
    assert len(tsne_points(x[:3])[0]) == 0


def test_the_map_is_an_svg_with_one_dot_per_image():
    x = np.random.default_rng(1).normal(size=(12, 4))
    svg = embedding_map_svg(x, [i % 3 for i in range(12)])
    assert svg.startswith("<svg") and "t-SNE of 12 test embeddings (3 classes)" in svg
    assert embedding_map_svg(x[:2], [0, 1]) == ""
