"""Zero-shot regularisation (GSP paper §4.3, (P3), Eq. 4.4, Algorithm 4)."""

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES, build_loss
from gspdml.models.output import EmbedderOutput
from gspdml.pooling import GSP
from gspdml.settings.sections import DataConfig


def make_zsr(**kwargs):
    return build_loss(
        {"name": "zsr", "base": {"name": "c2"}, **kwargs}, embedding_dim=6, num_classes=10
    )


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.tensor([0, 0, 3, 3, 5, 5, 1, 1, 7, 7, 2, 2])  # halves {0,3,5} | {1,7,2}
    emb = F.normalize(torch.randn(12, 6, generator=g), dim=1)
    z = torch.softmax(torch.randn(12, 4, generator=g), dim=1)
    return emb, labels, z


def reference_zs(loss, z, labels, scale, reduction):
    """Algorithm 4 with explicit per-half loops and the dual inversion of the paper; "mean" divides
    the sum of the 12 per-sample terms by 12 (the authors' code), "sum_of_halves" adds the two
    per-half means (Eq. 4.4)."""
    v = loss.class_embeddings.detach().double()
    z = z.double()
    total = 0.0
    for fit, pred in ((slice(0, 6), slice(6, 12)), (slice(6, 12), slice(0, 6))):
        zf, yf = z[fit], v[labels[fit]]
        a = (
            yf.T @ torch.linalg.inv(zf @ zf.T + 0.05 * torch.eye(6, dtype=torch.float64)) @ zf
        )  # d_v x m
        ce = 0.0
        for i in range(pred.start, pred.stop):
            logits = scale * (v @ (a @ z[i]))
            ce += -torch.log_softmax(logits, 0)[labels[i]]
        total += ce
    return total / 12 if reduction == "mean" else total / 6


@pytest.mark.parametrize("reduction", ["mean", "sum_of_halves"])
@pytest.mark.parametrize("scale", [1.0, 9.5])
def test_loss_matches_algorithm_4(scale, reduction):
    loss = make_zsr(logit_scale=scale, mixing=0.1, reduction=reduction)
    emb, labels, z = batch()
    got = loss(emb, labels, EmbedderOutput(emb, attributes=z))
    expected = 0.9 * loss.base(emb, labels) + 0.1 * reference_zs(loss, z, labels, scale, reduction)
    torch.testing.assert_close(got.double(), expected.double(), rtol=1e-5, atol=1e-6)


def test_hand_computed_reduction_and_scale_on_a_two_sample_batch():
    """One sample per half, two classes, unit class embeddings: each half's ridge fit on a single
    attribute vector z gives A z' = (z.z' / (z.z + ridge)) v_fit, so every logit is known in
    closed form."""
    loss = make_zsr(mixing=1.0, ridge=0.5)
    with torch.no_grad():
        loss.class_embeddings.zero_()
        loss.class_embeddings[0, 0] = 1.0
        loss.class_embeddings[1, 1] = 1.0
    labels = torch.tensor([0, 1])
    z = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    ratio_1 = 1.0 / (2.0 + 0.5)  # predict sample 0 from sample 1: z1.z0 / (z1.z1 + 0.5), along v_1
    ratio_0 = 1.0 / (1.0 + 0.5)  # predict sample 1 from sample 0: z0.z1 / (z0.z0 + 0.5), along v_0
    for scale, reduction, factor in (
        (1.0, "sum_of_halves", 1.0),
        (9.5, "mean", 0.5),
        (9.5, "sum_of_halves", 1.0),
    ):
        loss.logit_scale, loss.reduction = scale, reduction
        # sample 0 (class 0) is predicted along v_1: logits 0 (true class), s r1, and 0 for the 8 others
        l0 = np.log(8 + np.exp(scale * ratio_1) + 1)
        # sample 1 (class 1) is predicted along v_0: logits s r0, 0 (true class), and 0 for the 8 others
        l1 = np.log(8 + np.exp(scale * ratio_0) + 1)
        expected = factor * (l0 + l1)
        got = loss.zero_shot_loss(z, labels)
        assert got.item() == pytest.approx(expected, rel=1e-5), (scale, reduction)


def test_defaults_follow_the_authors_code_and_bad_options_are_named():
    loss = make_zsr()
    assert (loss.reduction, loss.logit_scale) == ("mean", 9.5)
    with pytest.raises(ConfigError, match=r"loss\.reduction: .*'halves'.*mean, sum_of_halves"):
        make_zsr(reduction="halves")
    with pytest.raises(ConfigError, match=r"loss\.logit_scale: must be positive"):
        make_zsr(logit_scale=0.0)


def test_gradients_reach_class_embeddings_prototypes_and_features():
    loss = make_zsr(mixing=0.5)
    pooling = GSP(6, num_prototypes=4, init="random")
    local = torch.randn(12, 6, 3, 3, requires_grad=True)
    pooled = pooling(local)
    emb = F.normalize(pooled.vector, dim=1)
    _, labels, _ = batch()
    loss.zero_shot_loss(pooled.attributes, labels).backward()
    for grad in (loss.class_embeddings.grad, pooling.prototypes.grad, local.grad):
        assert grad is not None and grad.abs().sum() > 0
    total = loss(emb, labels, EmbedderOutput(emb, attributes=pooled.attributes))
    assert torch.isfinite(total)


def test_halves_are_declared_and_checked_once_not_at_every_step():
    """Class-disjoint halves are the sampler's (data.halves), checked once from the declaration:
    the forward no longer reads the labels (a device sync at every step); it still refuses a
    batch that cannot be split in two."""
    loss = make_zsr()
    assert loss.batch_requirements().halves and "attributes" in loss.batch_requirements().reads
    data = DataConfig(halves=False, sampler="balanced", samples_per_class=2)
    with pytest.raises(ConfigError, match=r"data\.halves: the loss needs each batch ordered"):
        loss.batch_requirements().check_batches(data)
    emb, labels, z = batch()
    mixed = labels[torch.tensor([0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11])]
    assert torch.isfinite(loss(emb, mixed, EmbedderOutput(emb, attributes=z)))
    with pytest.raises(ConfigError, match="even batch"):
        loss(emb[:11], labels[:11], EmbedderOutput(emb[:11], attributes=z[:11]))


def test_missing_attributes_is_a_clear_error():
    loss = make_zsr()
    emb, labels, _ = batch()
    with pytest.raises(ConfigError, match="pseudo-attributes.*gsp"):
        loss(emb, labels, EmbedderOutput(emb))


def test_config_validation_and_parameters():
    LOSSES.check({"name": "zsr", "base": {"name": "c2", "neg_margin": 0.5}, "mixing": 0.1}, "loss")
    with pytest.raises(ConfigError, match=r"loss\.base\.bogus"):
        LOSSES.check({"name": "zsr", "base": {"name": "c2", "bogus": 1}}, "loss")
    with pytest.raises(ConfigError, match=r"loss\.mixing: .*\[0, 1\]"):
        make_zsr(mixing=1.5)
    loss = make_zsr(class_dim=3, lr_multiplier=10.0)
    assert loss.class_embeddings.shape == (10, 3) and loss.lr_multiplier == 10.0


def test_bf16_autocast_solves_in_float32():
    loss = make_zsr()
    emb, labels, z = batch()
    expected = loss.zero_shot_loss(z, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = loss.zero_shot_loss(z, labels)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected)


# ------------------------------------------------------ the initial scale of the class embeddings
def _zero_shot_loss_at_init(class_init, num_classes, seed):
    """L_ZS per half at initialisation: 128-D class embeddings, 16 classes x 4 samples (fewer
    classes when there are fewer), peaked GSP-like attributes (nonnegative, summing to 1)."""
    torch.manual_seed(seed)
    loss = build_loss(
        {"name": "zsr", "base": {"name": "c2"}, "class_init": class_init},
        embedding_dim=128,
        num_classes=num_classes,
    )
    classes = torch.randperm(num_classes)[: min(num_classes, 16)]
    labels = classes.repeat_interleave(4)
    z = torch.softmax(3.0 * torch.randn(len(labels), 128), dim=1)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the he_normal start warns (tested below)
        return loss.zero_shot_loss(z, labels).item()


@pytest.mark.parametrize("num_classes", [10, 100])
def test_the_default_init_keeps_the_zero_shot_loss_near_chance(num_classes):
    """Unit-scale class embeddings (the default) start L_ZS within 2 ln c whatever c; the authors'
    he_normal (std sqrt(2/c)) starts it at tens of ln c at 10 classes."""
    chance = math.log(num_classes)
    for seed in range(3):
        assert _zero_shot_loss_at_init("unit", num_classes, seed) < 2 * chance
    if num_classes == 10:
        assert _zero_shot_loss_at_init("he_normal", 10, 0) > 10 * chance


def test_the_class_init_scales():
    unit = make_zsr().class_embeddings.detach()
    literal = make_zsr(class_init="he_normal").class_embeddings.detach()
    assert make_zsr().class_init == "unit"
    # 10 x 6: unit std 1/sqrt(6) ~ 0.41, he_normal std sqrt(2/10) ~ 0.45; by the variance of rows
    big = build_loss(
        {"name": "zsr", "base": {"name": "c2"}}, embedding_dim=256, num_classes=1000
    ).class_embeddings.detach()
    assert big.pow(2).sum(1).mean().item() == pytest.approx(1.0, rel=0.05)
    assert unit.shape == literal.shape == (10, 6)
    with pytest.raises(ConfigError, match=r"loss\.class_init: .*'xavier'.*unit, he_normal"):
        make_zsr(class_init="xavier")


def test_a_numeric_class_init_is_the_standard_deviation_of_the_entries():
    """``class_init: 0.3`` draws N(0, 0.09) entries (by the mean squared entry over 256k draws);
    zero, negative, infinite, NaN and boolean values are refused naming the option."""
    torch.manual_seed(0)
    drawn = build_loss(
        {"name": "zsr", "base": {"name": "c2"}, "class_init": 0.3},
        embedding_dim=256,
        num_classes=1000,
    ).class_embeddings.detach()
    assert drawn.pow(2).mean().item() == pytest.approx(0.09, rel=0.02)
    assert abs(drawn.mean().item()) < 0.003
    for bad in (0, -0.1, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match=r"loss\.class_init: .*positive standard deviation"):
            make_zsr(class_init=bad)
    with pytest.raises(ConfigError, match=r"loss\.class_init: expected a string or a number"):
        make_zsr(class_init=True)


def test_a_first_training_step_far_above_chance_warns_once():
    emb, labels, z = batch()
    loss = make_zsr(class_init="he_normal")
    with torch.no_grad():
        loss.class_embeddings.mul_(10.0)  # the collapse regime: logits far beyond chance
    with pytest.warns(RuntimeWarning, match=r"zero-shot loss starts at .*loss.class_init: unit"):
        loss(emb, labels, EmbedderOutput(emb, attributes=z))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss(emb, labels, EmbedderOutput(emb, attributes=z))  # once only
        make_zsr()(emb, labels, EmbedderOutput(emb, attributes=z))  # near chance: silent
