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

Labels are ints or strings in any numbering (negative, sparse, 64-bit ids): they pass through
the one label coding of the retrieval metrics (:func:`gspdml.evaluation.results.encode_labels`),
whose codes follow the labels' order, so "the smallest label" is the smallest code and the votes
take one column per distinct training label.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.evaluation.results import LabelsLike, encode_labels
from gspdml.evaluation.top1 import classifier_codes, fraction_correct, labelled

#: DINO's k-NN evaluation (Caron et al. 2021, §4.1): 20 neighbours, temperature 0.07
DINO_K, DINO_TEMPERATURE = 20, 0.07


def _predicted_codes(
    train_features: torch.Tensor,
    train_codes: torch.Tensor,
    num_labels: int,
    test_features: torch.Tensor,
    k: int,
    temperature: float,
    device: Optional[torch.device | str],
) -> torch.Tensor:
    """The label code (int64, on the CPU) each test feature's weighted vote picks (module doc)."""
    from gspdml.evaluation.exact_knn import knn

    if temperature <= 0:
        raise ConfigError("temperature", f"must be positive, got {temperature}")
    if train_features.shape[0] != train_codes.shape[0]:
        raise ValueError(
            f"{train_features.shape[0]} training features but {train_codes.shape[0]} labels"
        )
    if test_features.shape[0] == 0:  # no test image: no neighbours to search
        return torch.zeros(0, dtype=torch.int64)
    train = F.normalize(train_features, dim=1)
    test = F.normalize(test_features.to(train.dtype), dim=1)
    distances, indices = knn(test, train, k=k, device=device)
    similarity = 1.0 - distances.cpu() / 2.0
    weights = torch.exp(similarity / temperature)
    votes = torch.zeros(test.shape[0], num_labels, dtype=torch.float64)
    votes.scatter_add_(1, train_codes[indices.cpu()], weights)
    return votes.argmax(dim=1)


def weighted_knn_predict(
    train_features: torch.Tensor,
    train_labels: LabelsLike,
    test_features: torch.Tensor,
    k: int = DINO_K,
    temperature: float = DINO_TEMPERATURE,
    device: Optional[torch.device | str] = None,
) -> np.ndarray:
    """The predicted label ``[N_test]`` (a numpy array of the training labels' values) of every
    test feature (module doc); the neighbours are searched on ``device`` (default: the
    features')."""
    values, codes, _ = encode_labels(train_labels)
    codes = labelled(codes, "train_labels")
    predicted = _predicted_codes(
        train_features, codes, len(values), test_features, k, temperature, device
    )
    predictions: np.ndarray = values[predicted.numpy()]
    return predictions


def weighted_knn_top1(
    train_features: torch.Tensor,
    train_labels: LabelsLike,
    test_features: torch.Tensor,
    test_labels: LabelsLike,
    k: int = DINO_K,
    temperature: float = DINO_TEMPERATURE,
    device: Optional[torch.device | str] = None,
) -> float:
    """The fraction of test features whose weighted k-NN prediction is their label (a test
    label no training image has is never predicted)."""
    values, train_codes, test_codes = classifier_codes(train_labels, test_labels)
    if len(test_codes) != test_features.shape[0]:
        raise ValueError(f"{test_features.shape[0]} test features but {len(test_codes)} labels")
    predicted = _predicted_codes(
        train_features, train_codes, len(values), test_features, k, temperature, device
    )
    correct = int((predicted == test_codes).sum())
    return fraction_correct(correct, len(test_codes), "the test features' split")
