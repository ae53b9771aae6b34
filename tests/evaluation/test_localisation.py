"""Boxes from attention maps and the localisation metrics (gspdml.evaluation.localisation)
against slow loops written from their definitions (tests/helpers/box_reference.py): MaxBoxAccV2
(Choe et al., CVPR 2020), the DINO-seg box and CorLoc."""

import numpy as np
import pytest
import torch

from gspdml.evaluation.localisation import (
    CAM_THRESHOLDS,
    MaxBoxAccV2,
    corloc_hit,
    dino_seg_box,
    lost_box,
    normalised_scoremap,
    pairwise_iou,
    threshold_boxes,
)
from tests.helpers.box_reference import iou, slow_dino_seg_box, slow_lost_box, slow_maxboxacc_v2


def _blobs(rng, size):
    """A score map with a few bright blobs and noise: several components at most thresholds."""
    y, x = np.mgrid[0:size, 0:size]
    scores = 0.05 * rng.random((size, size))
    for _ in range(3):
        cy, cx, r = rng.uniform(0, size, 2).tolist() + [rng.uniform(1.5, 4)]
        scores += rng.uniform(0.3, 1) * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * r * r))
    return torch.from_numpy(scores)


def _truth(rng, size, count):
    corners = rng.integers(0, size, (count, 2, 2))
    return np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1).astype(float)


def test_maxboxacc_v2_equals_a_slow_loop_over_thresholds_components_and_boxes():
    rng = np.random.default_rng(0)
    thresholds = CAM_THRESHOLDS[::7]  # a coarser sweep: the loop is slow
    metric, maps, truths = MaxBoxAccV2(thresholds=thresholds), [], []
    for i in range(6):
        scoremap = normalised_scoremap(_blobs(rng, 8), (20, 20))
        truth = _truth(rng, 20, 1 + i % 2)
        metric.add(scoremap, truth)
        maps.append(scoremap.tolist())
        truths.append([tuple(b) for b in truth])
    expected, correct = slow_maxboxacc_v2(maps, truths, thresholds)
    assert metric.correct.tolist() == correct
    assert metric.value() == pytest.approx(expected, abs=1e-12)
    assert 0 < metric.value() < 1  # neither trivial nor impossible: the check can fail


def test_threshold_boxes_of_a_known_mask_and_the_inclusive_iou():
    scoremap = np.zeros((10, 12))
    scoremap[2:5, 3:7] = 1.0  # rows 2..4, cols 3..6
    scoremap[7:10, 9:12] = 0.5  # touches the border: clipped to W - 1, H - 1
    boxes = threshold_boxes(scoremap, 0.3)
    assert boxes.tolist() == [[3, 2, 7, 5], [9, 7, 11, 9]]
    assert threshold_boxes(scoremap, 0.6).tolist() == [[3, 2, 7, 5]]
    assert threshold_boxes(np.zeros((4, 4)), 0.5).tolist() == [[0, 0, 0, 0]]
    # inclusive pixels: (0,0,1,1) is 4 pixels, overlapping (1,1,2,2) in one
    assert pairwise_iou(np.array([[0, 0, 1, 1]]), np.array([[1, 1, 2, 2]]), True)[0, 0] == 1 / 7
    assert pairwise_iou(np.array([[0, 0, 2, 2]]), np.array([[1, 1, 3, 3]]), False)[0, 0] == 1 / 7


def test_a_perfect_map_scores_one_and_a_wrong_one_zero():
    scoremap = np.zeros((16, 16))
    scoremap[4:9, 2:8] = 1.0
    right, wrong = MaxBoxAccV2(), MaxBoxAccV2()
    right.add(scoremap, np.array([[2.0, 4.0, 8.0, 9.0]]))
    wrong.add(scoremap, np.array([[10.0, 11.0, 15.0, 15.0]]))
    assert right.value() == 1.0 and wrong.value() == 0.0


def test_dino_seg_box_equals_a_slow_loop():
    rng = np.random.default_rng(1)
    for _ in range(20):
        attention = torch.from_numpy(rng.random((5, 7)) ** 4)
        box = dino_seg_box(attention, 16)
        assert tuple(box) == slow_dino_seg_box(attention.tolist(), 16)


def test_corloc_hit_is_iou_at_least_one_half_with_any_box():
    box = np.array([0.0, 0.0, 10.0, 10.0])
    truth = np.array([[20.0, 20.0, 30.0, 30.0], [0.0, 0.0, 10.0, 20.0]])  # IoU 0, 0.5
    assert corloc_hit(box, truth)
    assert not corloc_hit(box, truth[:1])
    assert not corloc_hit(box, np.array([[0.0, 0.0, 10.0, 20.01]]))
    assert iou(tuple(box), tuple(truth[1]), False) == 0.5


def test_lost_box_equals_a_slow_loop_and_expands_the_seed_over_its_component():
    rng = np.random.default_rng(2)
    boxes = set()
    for trial in range(12):
        rows, cols = 4, 5
        keys = torch.from_numpy(rng.normal(size=(rows * cols, 3)))
        k = 100 if trial % 2 else 6  # fewer candidates than patches: the seed set is cut
        box = lost_box(keys, rows, cols, 8, k=k)
        assert tuple(box) == slow_lost_box(keys.tolist(), rows, cols, 8, k=k)
        boxes.add(tuple(box))
    assert len(boxes) > 3  # the boxes differ with the features
