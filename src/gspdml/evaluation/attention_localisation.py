"""A released ViT's attention maps scored as localisation (Psomas thesis Table 3.5: MaxBoxAccV2
on the CUB test set and the ImageNet-1k validation set) and as unsupervised object discovery
(Table 3.6, DINO-seg and LOST: CorLoc on VOC07 and VOC12 trainval); the metrics and the boxes are
:mod:`gspdml.evaluation.localisation`, the maps :func:`gspdml.models.attention_maps.patch_attention`.

Images are read in RGB and normalised as the model was trained (:data:`NORMALISATIONS`). Localisation (Choe et al.,
CVPR 2020, §5, their evaluation code): each image is resized to ``size x size`` (bilinear, the
aspect ratio not kept) and its boxes scaled with it, coordinates truncated to integers; the map
is resized bicubically to the image. Object discovery (LOST, Siméoni et al., BMVC 2021, §4.1):
each image at its own resolution, padded with zeros (after the normalisation) at the bottom
and the right to a multiple of the patch; the DINO-seg box of the map, or LOST's box of the keys
(clipped to the image), is compared with the boxes in the original pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch
from PIL import Image

from gspdml.data.boxed_images import BoxedImage
from gspdml.data.images import load_image
from gspdml.data.recipes import IMAGENET_MEAN, IMAGENET_STD
from gspdml.evaluation.localisation import (
    DINO_SEG_MASS,
    MaxBoxAccV2,
    corloc_hit,
    dino_seg_box,
    lost_box,
    normalised_scoremap,
)
from gspdml.models.attention_maps import last_block_keys, patch_attention, released_vit
from gspdml.models.embedder import Embedder

#: a per-channel RGB (mean, std) in [0, 1]: ImageNet's, and the 0.5 of timm's ViT configs
#: (``IMAGENET_INCEPTION_MEAN``), which its training script uses unless told otherwise
Normalisation = tuple[tuple[float, float, float], tuple[float, float, float]]
NORMALISATIONS: dict[str, Normalisation] = {
    "imagenet": (IMAGENET_MEAN, IMAGENET_STD),
    "inception": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
}


def image_tensor(image: Image.Image, normalisation: str = "imagenet") -> torch.Tensor:
    """An RGB image as a ``[3, H, W]`` float tensor normalised by ``normalisation``
    (:data:`NORMALISATIONS`)."""
    pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
    mean, std = NORMALISATIONS[normalisation]
    return (pixels - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)


def resized_boxes(boxes: np.ndarray, original: tuple[int, int], size: int) -> np.ndarray:
    """``boxes`` of an image of ``original`` (width, height) in the ``size x size`` image,
    truncated to integers as the reference code does."""
    scale = np.asarray([size / original[0], size / original[1]] * 2)
    return np.asarray(np.floor(boxes * scale), dtype=np.float64)


def maxboxacc_v2(
    model: Embedder,
    items: Sequence[BoxedImage],
    *,
    size: int = 224,
    head: Optional[int] = None,
    normalisation: str = "imagenet",
    device: str = "cpu",
    batch_size: int = 32,
) -> dict[str, float]:
    """MaxBoxAccV2 of ``model``'s attention maps on ``items`` (fractions): ``maxboxacc_v2``
    and ``maxboxacc_iou<delta>`` for each IoU threshold (module doc)."""
    metric = MaxBoxAccV2()
    model = model.to(device).eval()
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        images, truths = [], []
        for item in chunk:
            image = load_image(item.path)
            truths.append(resized_boxes(item.boxes, image.size, size))
            resized = image.resize((size, size), Image.Resampling.BILINEAR)
            images.append(image_tensor(resized, normalisation))
        with torch.no_grad():
            maps = patch_attention(model, torch.stack(images).to(device), head)
        for attention, truth in zip(maps, truths):
            metric.add(normalised_scoremap(attention, (size, size)), truth)
    result = {"maxboxacc_v2": metric.value()}
    result.update({f"maxboxacc_iou{round(100 * d)}": v for d, v in metric.per_iou().items()})
    return result


#: the object-discovery methods: the DINO-seg box of the attention map, LOST's of the keys
DISCOVERY = ("dino-seg", "lost")


def corloc(
    model: Embedder,
    items: Sequence[BoxedImage],
    *,
    method: str = "dino-seg",
    head: Optional[int] = None,
    mass: float = DINO_SEG_MASS,
    normalisation: str = "imagenet",
    device: str = "cpu",
) -> dict[str, float]:
    """CorLoc of the boxes ``method`` (:data:`DISCOVERY`) finds with ``model`` on ``items``
    (a fraction), one image at a time (module doc)."""
    if method not in DISCOVERY:
        raise ValueError(f"method {method!r}: one of {DISCOVERY}")
    model = model.to(device).eval()
    patch = released_vit(model).shape.patch
    hits = 0
    for item in items:
        image = load_image(item.path)
        width, height = image.size
        pixels = torch.zeros(1, 3, -(-height // patch) * patch, -(-width // patch) * patch)
        pixels[0, :, :height, :width] = image_tensor(image, normalisation)
        pixels = pixels.to(device)
        with torch.no_grad():
            if method == "lost":
                keys, rows, cols = last_block_keys(model, pixels)
                box = lost_box(keys[0], rows, cols, patch)
                box[2:] = np.minimum(box[2:], [width, height])  # within the image
            else:
                box = dino_seg_box(patch_attention(model, pixels, head)[0], patch, mass)
        hits += corloc_hit(box, item.boxes)
    return {"corloc": hits / len(items)}
