"""Top-1 classification accuracy, the metric of Psomas thesis Tables 3.2, 3.4 and 3.12:

    top1 = (1 / N) sum_i [ argmax_c z_ic = y_i ]

over the ``N`` images of the evaluated split, ``z_i`` the classifier's logits of image ``i``. A
tie of the largest logits counts as correct only when the lowest tied class index is the label
(``torch.argmax``'s first maximum), so the metric does not depend on the device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


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
    ``(images, labels)``; an empty split is a ValueError."""
    correct = total = 0
    for images, labels in batches:
        correct += correct_top1(classify(images), labels)
        total += len(labels)
    if total == 0:
        raise ValueError("top-1 accuracy of an empty split")
    return correct / total
