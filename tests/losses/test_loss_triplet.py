import math

import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning import reducers as pml_reducers

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES


def _slow_triplet(emb, labels, ref, ref_labels, ref_self, margin, mining, reduction):
    e, r = emb.detach(), ref.detach()
    d = [
        [math.sqrt(float(((e[i] - r[j]) ** 2).sum())) for j in range(len(r))] for i in range(len(e))
    ]
    selected = []
    for a in range(len(e)):
        for p in range(len(r)):
            if p == int(ref_self[a]) or labels[a] != ref_labels[p]:
                continue
            for n in range(len(r)):
                if labels[a] == ref_labels[n] or n == int(ref_self[a]):
                    continue
                gap = d[a][n] - d[a][p]
                if mining == "semihard" and not (0 < gap <= margin):
                    continue
                if mining == "hard" and not gap <= min(0.0, margin):
                    continue
                selected.append(max(d[a][p] - d[a][n] + margin, 0.0))
    divisor = len(selected) if reduction == "mean" else sum(t > 0 for t in selected)
    return sum(selected) / max(divisor, 1), len(selected)


@pytest.mark.parametrize("mining", ["all", "semihard", "hard"])
@pytest.mark.parametrize("reduction", ["avg_nonzero", "mean"])
def test_triplet_equals_slow_loop_against_reference(make_batch, mining, reduction):
    emb, labels = make_batch(seed=8, classes=3, per_class=3)
    ref, ref_labels = make_batch(seed=9, classes=3, per_class=4)
    ref_self = torch.full((len(labels),), -1)
    for anchor in (0, 4, 8):  # these anchors have a copy in the reference set
        ref_self[anchor] = int(torch.nonzero(ref_labels == labels[anchor])[anchor % 3])
    loss = LOSSES.build({"triplet": {"margin": 0.3, "mining": mining, "reduction": reduction}})
    ours = loss(emb, labels, reference=ref, reference_labels=ref_labels, reference_self=ref_self)
    expected, count = _slow_triplet(emb, labels, ref, ref_labels, ref_self, 0.3, mining, reduction)
    assert count > 0
    assert ours.item() == pytest.approx(expected, rel=1e-9)


def test_triplet_chunking_does_not_change_the_value(make_batch):
    emb, labels = make_batch(seed=10, classes=4, per_class=5)
    whole = LOSSES.build({"triplet": {"margin": 0.2}})(emb, labels)
    chunked = LOSSES.build({"triplet": {"margin": 0.2, "max_elements": 3 * 20 * 20}})(emb, labels)
    assert chunked.item() == pytest.approx(whole.item(), rel=1e-12)


def test_triplet_memory_guard_names_the_option(make_batch):
    emb, labels = make_batch(seed=11)
    with pytest.raises(ConfigError, match="triplet.max_elements"):
        LOSSES.build({"triplet": {"max_elements": 100}})(emb, labels)
    hard = LOSSES.build({"triplet": {"max_elements": 100, "mining": "batch_hard"}})(emb, labels)
    assert torch.isfinite(hard)


@pytest.mark.parametrize("mining", ["all", "semihard", "hard"])
def test_triplet_matches_pytorch_metric_learning_miner(make_batch, mining):
    emb, labels = make_batch(seed=12, classes=8, per_class=8, dim=16)
    margin = 0.1190
    ours = LOSSES.build({"triplet": {"margin": margin, "mining": mining, "reduction": "mean"}})(
        emb, labels
    )
    pml = pml_losses.TripletMarginLoss(margin=margin, reducer=pml_reducers.MeanReducer())
    if mining == "all":  # PML's miner "all" keeps only margin violators; no miner = every triplet
        theirs = pml(emb, labels)
    else:
        theirs = pml(
            emb,
            labels,
            pml_miners.TripletMarginMiner(margin=margin, type_of_triplets=mining)(emb, labels),
        )
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-9)


def test_triplet_all_matches_pml_avg_nonzero_default(make_batch):
    emb, labels = make_batch(seed=13, classes=8, per_class=8, dim=16)
    ours = LOSSES.build({"triplet": {"margin": 0.0961}})(emb, labels)
    theirs = pml_losses.TripletMarginLoss(margin=0.0961)(emb, labels)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-9)


@pytest.mark.parametrize("reduction", ["avg_nonzero", "mean"])
def test_triplet_batch_hard_matches_pml_batch_hard_miner(make_batch, reduction):
    emb, labels = make_batch(seed=14, classes=8, per_class=4, dim=16)
    ours = LOSSES.build(
        {"triplet": {"margin": 0.3, "mining": "batch_hard", "reduction": reduction}}
    )(emb, labels)
    reducer = (
        pml_reducers.MeanReducer() if reduction == "mean" else pml_reducers.AvgNonZeroReducer()
    )
    miner = pml_miners.BatchHardMiner()
    theirs = pml_losses.TripletMarginLoss(margin=0.3, reducer=reducer)(
        emb, labels, miner(emb, labels)
    )
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-9)
    ours.backward()
    assert emb.grad.abs().sum() > 0


def test_triplet_rejects_unknown_mining():
    allowed = "all, semihard, hard, batch_hard"
    with pytest.raises(
        ConfigError, match=rf"triplet.mining: unknown mining 'easy'; allowed: {allowed}"
    ):
        LOSSES.build({"triplet": {"mining": "easy"}})


def test_triplet_mining_boundaries_on_a_hand_built_tie():
    """Anchor (1,0), positive (0,1), negative (0,-1): d_ap = d_an = sqrt(2), a tie that "hard"
    (d_an - d_ap <= 0) keeps and "semihard" (0 < d_an - d_ap) drops; the reverse triplet from the
    positive has d_an - d_ap = 2 - sqrt(2) > margin and is in neither."""
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0, 1])
    hard = LOSSES.build({"triplet": {"margin": 0.3, "mining": "hard", "reduction": "mean"}})(
        emb, labels
    )
    semihard = LOSSES.build(
        {"triplet": {"margin": 0.3, "mining": "semihard", "reduction": "mean"}}
    )(emb, labels)
    every = LOSSES.build({"triplet": {"margin": 0.3, "mining": "all", "reduction": "mean"}})(
        emb, labels
    )
    assert hard.item() == pytest.approx(0.3, abs=1e-5) and semihard.item() == 0.0
    assert every.item() == pytest.approx(0.3 / 2, abs=1e-5)
