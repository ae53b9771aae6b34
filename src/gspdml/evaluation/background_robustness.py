"""Background robustness of an ImageNet-1k classifier on ImageNet-9 and its variations (Xiao
et al., ICLR 2021, §2 and their evaluation code; Psomas thesis Table 3.7): the top-1 ImageNet
class of each image mapped to its ImageNet-9 class
(:data:`gspdml.data.imagenet9.IN_TO_IN9`; a class outside the 9 is wrong), accuracy per
variation, and the BG-gap ``acc(mixed_same) - acc(mixed_rand)`` (§3: how much the model relies
on the background's correlation with the class). The release's images are 224 x 224 and read
as they are (resized to ``size`` otherwise), normalised as the model was trained
(:data:`gspdml.evaluation.attention_localisation.NORMALISATIONS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from PIL import Image
from torch import nn

from gspdml.data.imagenet9 import IN_TO_IN9
from gspdml.data.images import load_image
from gspdml.evaluation.attention_localisation import image_tensor
from gspdml.evaluation.top1 import fraction_correct
from gspdml.models.embedder import Embedder


def in9_predictions(logits: torch.Tensor) -> torch.Tensor:
    """The ImageNet-9 class of each row's top-1 ImageNet class (-1: none of the 9)."""
    mapping = torch.tensor(IN_TO_IN9, device=logits.device)
    return mapping[logits.argmax(dim=1)]


def in9_accuracy(
    model: Embedder,
    classifier: nn.Linear,
    items: Sequence[tuple[Path, int]],
    *,
    size: int = 224,
    normalisation: str = "imagenet",
    device: str = "cpu",
    batch_size: int = 64,
) -> float:
    """The ImageNet-9 top-1 accuracy (a fraction) of ``classifier`` on ``model``'s pooled
    features of ``items`` (module doc); no items are refused
    (:func:`~gspdml.evaluation.top1.fraction_correct`)."""
    model, classifier = model.to(device).eval(), classifier.to(device).eval()
    correct = 0
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        images = []
        for path, _ in chunk:
            image = load_image(path)
            if image.size != (size, size):
                image = image.resize((size, size), Image.Resampling.BILINEAR)
            images.append(image_tensor(image, normalisation))
        with torch.no_grad():
            pooled = model(torch.stack(images).to(device)).pooled
            assert pooled is not None  # an Embedder's output has it
            predicted = in9_predictions(classifier(pooled)).cpu()
        correct += int((predicted == torch.tensor([label for _, label in chunk])).sum())
    return fraction_correct(correct, len(items), "the ImageNet-9 variation")
