"""The one reduction of every loss (gspdml.losses.reduction): each reducer against a slow loop
over the terms, pieces that add up, a part without terms, and one vocabulary for every loss."""

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES, build_loss
from gspdml.losses.reduction import REDUCTIONS, Terms, pair_anchors, reduce


def _pairs(seed=0):
    g = torch.Generator().manual_seed(seed)
    values = torch.rand(5, 7, generator=g, dtype=torch.float64)
    values[values < 0.3] = 0.0  # some zero terms, for avg_nonzero
    weights = (torch.rand(5, 7, generator=g) < 0.6).double()
    weights[2] = 0.0  # an anchor without pairs
    return values * weights, weights


def test_each_reducer_is_the_sum_over_its_count():
    values, weights = _pairs()
    anchors = weights.bool().any(1)
    part = {"pairs": Terms(values, weights=weights, anchors=anchors)}
    flat = [float(v) for v in values.flatten()]
    rows_with_pairs = sum(1 for row in weights.tolist() if any(w > 0 for w in row))
    expected = {
        "mean": sum(flat) / float(weights.sum()),
        "avg_nonzero": sum(flat) / sum(1 for v in flat if v > 0),
        "anchor_mean": sum(flat) / rows_with_pairs,
        "sum_of_halves": sum(flat) / (len(flat) // 2),
    }
    assert set(expected) == set(REDUCTIONS)
    for reduction, value in expected.items():
        assert float(reduce(part, reduction)) == pytest.approx(value, rel=1e-12), reduction


def test_parts_add_with_their_weights_and_a_fixed_reduction_wins():
    values, weights = _pairs(1)
    regulariser = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    parts = {
        "pairs": Terms(values),
        "beta": Terms(regulariser, weight=0.5, reduction="mean"),
    }
    nonzero = sum(1 for v in values.flatten().tolist() if v > 0)
    expected = float(values.sum()) / nonzero + 0.5 * 7.0 / 3.0
    assert float(reduce(parts, "avg_nonzero")) == pytest.approx(expected, rel=1e-12)


def test_pieces_sum_and_count_as_one_tensor():
    values, _ = _pairs(2)
    whole = {"t": Terms(values.flatten())}
    pieces = {"t": Terms(values[:2].flatten(), values[2:].flatten())}
    for reduction in ("mean", "avg_nonzero", "sum_of_halves"):
        assert float(reduce(pieces, reduction)) == pytest.approx(
            float(reduce(whole, reduction)), rel=1e-12
        )


def test_a_part_without_terms_is_zero_and_keeps_the_graph():
    x = torch.ones(3, requires_grad=True)
    empty = (x * 2)[:0]
    for reduction in ("mean", "avg_nonzero"):
        value = reduce({"t": Terms(empty)}, reduction)
        assert value.item() == 0.0 and value.requires_grad
    none = torch.zeros(2, 3)
    value = reduce({"t": Terms(x.sum() * none, anchors=pair_anchors(none, none))}, "anchor_mean")
    assert value.item() == 0.0 and value.requires_grad


def test_zsr_sum_of_halves_is_twice_the_mean():
    """GSP paper Eq. 4.4 (sum of the half means) against the authors' batch mean: with equal
    halves the one is twice the other."""
    torch.manual_seed(0)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    z = torch.rand(8, 5)
    losses = {
        reduction: build_loss(
            {"name": "zsr", "base": "c2", "reduction": reduction},
            embedding_dim=6,
            num_classes=4,
        ).eval()
        for reduction in ("mean", "sum_of_halves")
    }
    losses["sum_of_halves"].load_state_dict(losses["mean"].state_dict())
    mean = float(losses["mean"].zero_shot_loss(z, labels))
    halves = float(losses["sum_of_halves"].zero_shot_loss(z, labels))
    assert halves == pytest.approx(2 * mean, rel=1e-6)


@pytest.mark.parametrize("name", sorted({LOSSES.primary(n) for n in LOSSES.names()}))
def test_every_loss_offers_reductions_of_the_one_vocabulary(name):
    loss_class = LOSSES.get(name)
    assert set(loss_class.reductions) <= set(REDUCTIONS)
    assert loss_class.reduction in loss_class.reductions


def test_a_reduction_a_loss_does_not_offer_is_named():
    with pytest.raises(ConfigError, match=r"loss\.reduction: unknown value 'anchor_mean'"):
        build_loss({"triplet": {"reduction": "anchor_mean"}})
