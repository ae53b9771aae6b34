"""Cross-class zero-shot prediction from class attribute vectors (GSP paper §5.1 "zero-shot
prediction" and supplement §2.3; XML paper Fig. 4 MAP_x; Gürbüz thesis §5.3.3).

Per class ``c`` the attribute vector ``z_c`` is the mean of the samples' pseudo-attributes
(GSP's transported mass per prototype, or XML's prototype histogram) and ``e_c`` the mean
embedding. For each random split of the classes into two halves a ridge regressor (problem
(P3), ``epsilon`` = ``ridge``)::

    A = argmin_A sum_{c in S} ||A z_c - e_c||^2 + ridge ||A||_F^2

is fitted on one half ``S``; it predicts ``A z_c`` for the other half, and each prediction is
classified by its nearest true class mean of that half under the L2 distance and the cosine
distance. The score of a split is the fraction of correctly classified held-out classes; the
result is the mean over ``repeats`` splits (1000 in the paper).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gspdml.ops.ridge import ridge_predict


def class_means(values: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(classes [C], means [C, d])``: the mean row of every label, classes sorted."""
    labels = torch.as_tensor(labels)
    classes = torch.unique(labels)
    return classes, torch.stack([values[labels == c].mean(dim=0) for c in classes])


def cross_class_prediction(
    attributes: torch.Tensor,
    embeddings: torch.Tensor,
    repeats: int = 1000,
    fit_classes: int | None = None,
    ridge: float = 0.05,
    seed: int = 0,
) -> dict[str, float]:
    """Mean nearest-class-mean accuracy of the cross-class ridge prediction (module docstring).

    Args:
        attributes: class attribute vectors ``[C, m]``.
        embeddings: class mean embeddings ``[C, d]``.
        fit_classes: size of the fitting half (``C // 2`` by default; the rest is predicted).
    Returns:
        ``{"l2": accuracy, "cosine": accuracy, "l2_std": ..., "cosine_std": ...}`` over the splits.
    """
    num_classes = attributes.shape[0]
    if embeddings.shape[0] != num_classes:
        raise ValueError(
            f"{num_classes} attribute vectors but {embeddings.shape[0]} class embeddings"
        )
    fit = num_classes // 2 if fit_classes is None else fit_classes
    if not 1 <= fit < num_classes - 1:
        raise ValueError(
            f"the fitting half must leave at least two classes to predict; got {fit} of {num_classes}"
        )
    attributes, embeddings = attributes.double(), embeddings.double()
    gen = torch.Generator().manual_seed(seed)
    scores: dict[str, list[float]] = {"l2": [], "cosine": []}
    for _ in range(repeats):
        order = torch.randperm(num_classes, generator=gen)
        seen, unseen = order[:fit], order[fit:]
        predicted = ridge_predict(attributes[seen], embeddings[seen], attributes[unseen], ridge)
        truth = torch.arange(len(unseen))
        l2 = torch.cdist(predicted, embeddings[unseen]).argmin(dim=1)
        similarity = F.normalize(predicted, dim=1) @ F.normalize(embeddings[unseen], dim=1).T
        cosine = similarity.argmax(dim=1)
        scores["l2"].append(float((l2 == truth).double().mean()))
        scores["cosine"].append(float((cosine == truth).double().mean()))
    values = {name: torch.tensor(v, dtype=torch.float64) for name, v in scores.items()}
    result = {name: float(v.mean()) for name, v in values.items()}
    result.update({f"{name}_std": float(v.std(unbiased=False)) for name, v in values.items()})
    return result
