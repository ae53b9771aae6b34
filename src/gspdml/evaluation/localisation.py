"""Boxes from attention maps and the two localisation metrics of Psomas thesis Tables 3.5 and
3.6: MaxBoxAccV2 (Choe et al., "Evaluating Weakly Supervised Object Localization Methods
Right", CVPR 2020, §4.1 and its "MaxBoxAccV2") and CorLoc (Deselaers et al., "Localizing objects
while learning their appearance", ECCV 2010), with the DINO-seg box of an attention map (Caron et
al., DINO, ICCV 2021, §4.2.1 "the top 60% of the attention mass"; Siméoni et al., LOST, BMVC
2021, §4.1 "DINO-seg": the largest connected component of that mask).

Boxes are ``(x0, y0, x1, y1)`` rows of floats.

**MaxBoxAccV2.** The score map ``s`` (``H x W``, the evaluation image's size) is min-max
normalised to ``[0, 1]`` and quantised to 8 bits, ``q = floor(255 s)``. For each CAM threshold
``tau`` in ``{0, 0.01, .., 0.99}`` the mask ``q > floor(tau max q)`` is split into its
8-connected components, each giving the box of its pixels ``(xmin, ymin, min(xmax + 1, W - 1),
min(ymax + 1, H - 1))`` (a component's bounding rectangle clipped as the reference code
clips it; an empty mask gives ``(0, 0, 0, 0)``). An image is correct at ``(tau, delta)`` when the
best IoU over all its boxes and all ground-truth boxes is at least ``delta`` (V2: every component,
not only the largest). IoU counts pixels inclusively (``area = (x1 - x0 + 1)(y1 - y0 + 1)``), as
the reference code does. ``BoxAcc(tau, delta)`` is the fraction of correct images,

    MaxBoxAccV2 = 1/3 sum_{delta in {0.3, 0.5, 0.7}} max_tau BoxAcc(tau, delta).

The reference code traces contours (OpenCV), which also yields the contours of holes inside a
component; their boxes lie inside the component's box and are not candidates here. It resizes
the map with OpenCV's bicubic filter (the same kernel, ``a = -0.75``; borders reflected where
torch's :func:`~torch.nn.functional.interpolate` replicates them).

**CorLoc.** The fraction of images whose one predicted box has an IoU of at least 0.5 with some
ground-truth box of the image (continuous coordinates, ``area = (x1 - x0)(y1 - y0)``, as LOST's
evaluation computes it).

**DINO-seg box.** The attention ``a`` of one head over the ``h x w`` patches keeps the patches
holding the top ``mass`` (0.6) of its sum: sorted ascending and normalised, the patches whose
cumulative sum exceeds ``1 - mass``. The box is that of the largest 4-connected component of
the kept patches, in pixels: ``(xmin p, ymin p, (xmax + 1) p, (ymax + 1) p)`` for patches of
``p`` pixels.

**LOST box** (Siméoni et al., BMVC 2021, §3.1-3.2). From the keys ``f_p`` of the last block's
attention of the ``h x w`` patches (the heads concatenated): the similarity ``A = F F^T``, the
degree ``d_p = |{q : A_pq > 0}|``, the seed ``p*`` of lowest degree, the seed set ``S``: the
``k = 100`` patches of lowest degree that correlate positively with the seed, the mask ``m_q =
[sum_{s in S} A_sq > 0]``, and the box of the 4-connected component of the mask that holds the
seed, in pixels as above (ties of the degree: the first patch in raster order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import ndimage

#: the CAM thresholds of MaxBoxAccV2 (Choe et al. 2020: steps of 0.01)
CAM_THRESHOLDS = tuple(i / 100 for i in range(100))
#: the IoU thresholds delta of MaxBoxAccV2
IOU_THRESHOLDS = (0.3, 0.5, 0.7)
#: the IoU a CorLoc box needs
CORLOC_IOU = 0.5
#: the share of the attention mass DINO-seg keeps
DINO_SEG_MASS = 0.6
#: the lowest-degree patches among which LOST expands its seed
LOST_K = 100
_EIGHT = np.ones((3, 3), dtype=bool)


def normalised_scoremap(scores: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
    """A patch-level map ``[h, w]`` resized bicubically to ``size`` (H, W) and min-max
    normalised to ``[0, 1]`` (a constant map is all zeros), as float64."""
    resized = torch.nn.functional.interpolate(
        scores.detach().double()[None, None], size=size, mode="bicubic", align_corners=False
    )[0, 0]
    low, high = resized.min(), resized.max()
    span = high - low
    normed = (resized - low) / span if span > 0 else torch.zeros_like(resized)
    return normed.cpu().numpy()


def component_boxes(mask: np.ndarray, connectivity: int = 8) -> np.ndarray:
    """The pixel extents ``(xmin, ymin, xmax, ymax)`` (inclusive) of each connected component of
    the boolean ``mask``, ``[k, 4]`` int, and their sizes ``[k]`` appended as a fifth column."""
    structure = _EIGHT if connectivity == 8 else None
    labels, count = ndimage.label(mask, structure=structure)
    if count == 0:
        return np.zeros((0, 5), dtype=np.int64)
    sizes = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    rows = []
    for (ys, xs), size in zip(ndimage.find_objects(labels), sizes):
        rows.append((xs.start, ys.start, xs.stop - 1, ys.stop - 1, size))
    return np.asarray(rows, dtype=np.int64)


def threshold_boxes(scoremap: np.ndarray, tau: float) -> np.ndarray:
    """The boxes ``[k, 4]`` of every 8-connected component of ``scoremap`` at CAM threshold
    ``tau`` (module doc), clipped as the reference code clips them."""
    height, width = scoremap.shape
    quantised = np.floor(scoremap * 255).astype(np.int64)
    mask = quantised > int(tau * quantised.max())
    extents = component_boxes(mask)
    if len(extents) == 0:
        return np.zeros((1, 4))
    boxes = extents[:, :4].astype(np.float64)
    boxes[:, 2] = np.minimum(boxes[:, 2] + 1, width - 1)
    boxes[:, 3] = np.minimum(boxes[:, 3] + 1, height - 1)
    return boxes


def pairwise_iou(boxes: np.ndarray, truth: np.ndarray, inclusive: bool) -> np.ndarray:
    """IoU ``[len(boxes), len(truth)]``; ``inclusive``: pixel counts (``+1`` on each side,
    MaxBoxAccV2), else continuous areas (CorLoc)."""
    one = 1.0 if inclusive else 0.0
    a, b = np.asarray(boxes, np.float64)[:, None], np.asarray(truth, np.float64)[None]
    width = np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]) + one
    height = np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]) + one
    inter = np.clip(width, 0, None) * np.clip(height, 0, None)
    area_a = (a[..., 2] - a[..., 0] + one) * (a[..., 3] - a[..., 1] + one)
    area_b = (b[..., 2] - b[..., 0] + one) * (b[..., 3] - b[..., 1] + one)
    union = area_a + area_b - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


@dataclass
class MaxBoxAccV2:
    """The running counts of MaxBoxAccV2 (module doc): :meth:`add` one image's score map and
    ground-truth boxes (in the score map's pixels), :meth:`value` the metric, :meth:`per_iou`
    ``max_tau BoxAcc(tau, delta)`` per ``delta``."""

    thresholds: Sequence[float] = CAM_THRESHOLDS
    ious: Sequence[float] = IOU_THRESHOLDS
    correct: np.ndarray = field(init=False)
    images: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.correct = np.zeros((len(self.ious), len(self.thresholds)), dtype=np.int64)

    def add(self, scoremap: np.ndarray, truth: np.ndarray) -> None:
        for t, tau in enumerate(self.thresholds):
            best = pairwise_iou(threshold_boxes(scoremap, tau), truth, inclusive=True).max()
            self.correct[:, t] += best >= np.asarray(self.ious)
        self.images += 1

    def per_iou(self) -> dict[float, float]:
        if self.images == 0:
            raise ValueError("MaxBoxAccV2 of no image")
        best = self.correct.max(axis=1) / self.images
        return {delta: float(value) for delta, value in zip(self.ious, best)}

    def value(self) -> float:
        return float(np.mean(list(self.per_iou().values())))


def dino_seg_box(attention: torch.Tensor, patch: int, mass: float = DINO_SEG_MASS) -> np.ndarray:
    """The DINO-seg box ``[4]`` in pixels of one head's attention ``[h, w]`` over the patches
    (module doc)."""
    values = attention.detach().double().flatten()
    order = torch.argsort(values)
    ranked = values[order] / values.sum()
    keep = torch.zeros_like(values, dtype=torch.bool)
    keep[order] = torch.cumsum(ranked, 0) > 1 - mass
    extents = component_boxes(keep.reshape(attention.shape).cpu().numpy(), connectivity=4)
    xmin, ymin, xmax, ymax, _ = extents[int(np.argmax(extents[:, 4]))]
    return np.asarray([xmin * patch, ymin * patch, (xmax + 1) * patch, (ymax + 1) * patch], float)


def lost_box(keys: torch.Tensor, rows: int, cols: int, patch: int, k: int = LOST_K) -> np.ndarray:
    """The LOST box ``[4]`` in pixels from the last block's keys ``[rows * cols, d]`` of the
    patches (row-major; module doc)."""
    features = keys.detach().double()
    similarity = features @ features.T
    degree = (similarity > 0).sum(dim=1)
    order = torch.argsort(degree, stable=True)  # lowest degree first
    seed = int(order[0])
    candidates = order[: min(k, len(order))]
    similar = candidates[similarity[seed, candidates] > 0]
    mask = (similarity[similar].sum(dim=0) > 0).reshape(rows, cols).cpu().numpy()
    labels, _ = ndimage.label(mask)
    ys, xs = np.nonzero(labels == labels[seed // cols, seed % cols])
    return np.asarray(
        [xs.min() * patch, ys.min() * patch, (xs.max() + 1) * patch, (ys.max() + 1) * patch], float
    )


def corloc_hit(box: np.ndarray, truth: np.ndarray) -> bool:
    """Whether ``box`` localises one of the ground-truth boxes ``truth`` ``[n, 4]`` (IoU >= 0.5;
    an image without boxes is a miss)."""
    if len(truth) == 0:
        return False
    return bool(pairwise_iou(box[None], truth, inclusive=False).max() >= CORLOC_IOU)
