"""DINO's weighted k-nearest-neighbour classifier on frozen features (Caron et al., "Emerging
Properties in Self-Supervised Vision Transformers", ICCV 2021, §4.1 and Appendix; following Wu
et al., "Unsupervised Feature Learning via Non-Parametric Instance Discrimination", CVPR 2018,
§3.4).

The training and test features are L2-normalised; a test image's k nearest training images by
cosine similarity ``s_j`` vote for their class with weight ``exp(s_j / T)``, and the class with
the largest total weight is the prediction::

    ŷ = argmax_c  Σ_{j ∈ N_k(x)} [y_j = c] · exp(s_j / T)

DINO reports k = 20 and T = 0.07; the Psomas thesis evaluates SimPool with k = 10 (§3.4.3).
The neighbours are exact (:func:`gspdml.evaluation.exact_knn.knn`: on unit vectors the squared
distance is ``2 - 2 s``, so its order by (distance, index) is the order by similarity, the
smaller training index first among equals, the distances re-ranked in float64) and the vote is
summed in float64; among classes of equal weight the smallest label wins. The features are
normalised in their own dtype (float32 features of ImageNet's 1.28M training images stay
float32).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError

#: DINO's k-NN evaluation (Caron et al. 2021, §4.1): 20 neighbours, temperature 0.07
DINO_K, DINO_TEMPERATURE = 20, 0.07


def weighted_knn_predict(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    test_features: torch.Tensor,
    k: int = DINO_K,
    temperature: float = DINO_TEMPERATURE,
    device: Optional[torch.device | str] = None,
) -> torch.Tensor:
    """The predicted label ``[N_test]`` (int64, on the CPU) of every test feature (module
    doc); the neighbours are searched on ``device`` (default: the features')."""
    from gspdml.evaluation.exact_knn import knn

    if temperature <= 0:
        raise ConfigError("temperature", f"must be positive, got {temperature}")
    if train_features.shape[0] != train_labels.shape[0]:
        raise ValueError(
            f"{train_features.shape[0]} training features but {train_labels.shape[0]} labels"
        )
    train = F.normalize(train_features, dim=1)
    test = F.normalize(test_features.to(train.dtype), dim=1)
    distances, indices = knn(test, train, k=k, device=device)
    similarity = 1.0 - distances.cpu() / 2.0
    weights = torch.exp(similarity / temperature)
    labels = train_labels.to(torch.int64).cpu()
    votes = torch.zeros(test.shape[0], int(labels.max()) + 1, dtype=torch.float64)
    votes.scatter_add_(1, labels[indices.cpu()], weights)
    return votes.argmax(dim=1)


def weighted_knn_top1(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    test_features: torch.Tensor,
    test_labels: torch.Tensor,
    k: int = DINO_K,
    temperature: float = DINO_TEMPERATURE,
    device: Optional[torch.device | str] = None,
) -> float:
    """The fraction of test features whose weighted k-NN prediction is their label."""
    predicted = weighted_knn_predict(
        train_features, train_labels, test_features, k, temperature, device
    )
    return float((predicted == test_labels.to(torch.int64).cpu()).double().mean())
