"""NMI and AMI of float16 and bfloat16 embeddings (a run evaluated at half precision): k-means
runs on them widened to float32, so they score as their float32 values do. bfloat16, which
numpy lacks, used to fail with ``TypeError: Got unsupported ScalarType BFloat16`` in every
entry point that clusters (``retrieval_metrics(clustering=True)``, the PML drop-in's NMI)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score

from gspdml.evaluation import clustering_scores, kmeans_assignments, retrieval_metrics
from gspdml.evaluation.compat import AccuracyCalculator


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_embeddings_cluster_as_their_float32_values(dtype):
    g = torch.Generator().manual_seed(0)
    labels = np.repeat(np.arange(4), 15)
    centers = torch.randn(4, 8, generator=g)
    x = (centers[labels] + 0.6 * torch.randn(60, 8, generator=g)).to(dtype)
    widened = x.float()
    clusters = kmeans_assignments(widened, 4, seed=1)
    assert np.array_equal(kmeans_assignments(x, 4, seed=1), clusters)
    expected = {
        "nmi": normalized_mutual_info_score(labels, clusters),
        "ami": adjusted_mutual_info_score(labels, clusters),
    }
    assert clustering_scores(x, labels, seed=1) == pytest.approx(expected, abs=1e-12)
    got = retrieval_metrics(x, labels, clustering=True, seed=1, recall_at=(1,))
    assert got["nmi"] == pytest.approx(expected["nmi"], abs=1e-12)
    drop_in = AccuracyCalculator(include=("NMI", "AMI")).get_accuracy(x, labels)
    reference = clustering_scores(widened, labels)  # the drop-in clusters with seed 0
    assert drop_in == pytest.approx({"NMI": reference["nmi"], "AMI": reference["ami"]}, abs=1e-12)
