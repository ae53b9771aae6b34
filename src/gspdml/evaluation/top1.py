"""Top-1 classification accuracy, the metric of Psomas thesis Tables 3.2, 3.4 and 3.12:

    top1 = (1 / N) sum_i [ argmax_c z_ic = y_i ]

over the ``N`` images of the evaluated split, ``z_i`` the classifier's logits of image ``i``. A
tie of the largest logits counts as correct only when the lowest tied class index is the label
(``torch.argmax``'s first maximum), so the metric does not depend on the device.

A split without images has no accuracy (0 / 0): every classification accuracy (this top-1, the
linear probe's, DINO's k-NN classifier's, the ImageNet-9 accuracy) is divided by
:func:`fraction_correct`, which refuses it as the retrieval metrics refuse a split without
queries (:class:`~gspdml.evaluation.metrics.NoQueryToScore`), never NaN or a ZeroDivisionError.

The classifiers trained on labelled features (the linear probe, DINO's k-NN classifier) take
labels in any numbering through one coding, :func:`classifier_codes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.metrics import NoQueryToScore
from gspdml.evaluation.results import UNKNOWN, LabelsLike, encode_labels


def fraction_correct(correct: int, total: int, split: str = "the split") -> float:
    """``correct / total``, the accuracy of a split of ``total`` images; a
    :class:`NoQueryToScore` naming ``split`` when it has none."""
    if total == 0:
        raise no_image_to_score(split)
    return correct / total


def no_image_to_score(split: str) -> NoQueryToScore:
    """The refusal of a classification accuracy of ``split``, which has no images (module doc);
    raised before the work by what would compute one (the probe's features of a split)."""
    return NoQueryToScore(
        f"no image to score: {split} has no images, so its accuracy is undefined; "
        "evaluate a split with images"
    )


def labelled(codes: torch.Tensor, name: str) -> torch.Tensor:
    """``codes`` (of :func:`~gspdml.evaluation.results.encode_labels`) when every label is known;
    a None label is refused (a classifier's images are labelled)."""
    if bool((codes == UNKNOWN).any()):
        row = int((codes == UNKNOWN).nonzero()[0])
        raise ConfigError(name, f"row {row} has no label (None); give every image its label")
    return codes


def classifier_codes(
    train_labels: LabelsLike, test_labels: LabelsLike
) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """The one label coding of a classifier's training and test images, ``(values, train codes,
    test codes)``: labels in any numbering (negative, sparse, 64-bit ids, strings) coded in their
    order by :func:`~gspdml.evaluation.results.encode_labels`, a None label refused."""
    values, test_codes, train_codes = encode_labels(test_labels, train_labels)
    return values, labelled(train_codes, "train_labels"), labelled(test_codes, "test_labels")


def correct_top1(logits: torch.Tensor, labels: torch.Tensor) -> int:
    """How many rows of ``logits`` ``[N, C]`` have their first largest entry at ``labels``."""
    if logits.dim() != 2 or labels.shape != (logits.shape[0],):
        raise ValueError(f"logits [N, C] and labels [N], got {logits.shape} and {labels.shape}")
    predicted = torch.argmax(logits.float(), dim=1)
    return int((predicted == labels.to(predicted.device)).sum())


@torch.no_grad()
def top1_accuracy(
    classify: Callable[[torch.Tensor], torch.Tensor],
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
) -> float:
    """The top-1 accuracy (a fraction) of ``classify`` (images -> logits) over ``batches`` of
    ``(images, labels)``; an empty split is refused (:func:`fraction_correct`)."""
    correct = total = 0
    for images, labels in batches:
        correct += correct_top1(classify(images), labels)
        total += len(labels)
    return fraction_correct(correct, total)
