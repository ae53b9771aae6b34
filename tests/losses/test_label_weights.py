"""One registry of losses: the label-weighted form of each base loss Metrix mixes.

* With 0/1 weights (hard labels), the weighted path is the ordinary forward, value and gradient.
* Metrix builds its base from ``LOSSES`` with the recipe's defaults (``RECIPE_DEFAULTS``); the
  base losses keep their own defaults outside Metrix.
* Pinned: Metrix's loss and gradient on a fixed batch, as computed by the former second
  registry of label-weighted losses (``metrix_losses.MIXED_LOSSES``) before it was folded in.
"""

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES, build_loss
from gspdml.losses.base import LabelWeightedLoss
from gspdml.losses.metrix import RECIPE_DEFAULTS


def _batch(seed=0, n=12, dim=5, classes=4):
    g = torch.Generator().manual_seed(seed)
    emb = torch.nn.functional.normalize(
        torch.randn(n, dim, generator=g, dtype=torch.float64), dim=1
    )
    labels = torch.arange(n) % classes
    return emb, labels


PAIR_SPECS = [
    "c1",
    {"c1": {"margin": 0.2}},
    "contrastive_similarity",
    "c2",
    {"c2": {"pos_margin": 0.1, "neg_margin": 0.9, "reduction": "mean"}},
    {"c2": {"neg_margin": 0.9, "reduction": "anchor_mean"}},
    {"ms": {"mining": False}},
    {"ms": {"epsilon": None, "alpha": 17.97, "beta": 75.66, "base": 0.77}},
]


@pytest.mark.parametrize("spec", PAIR_SPECS, ids=str)
def test_weighted_pair_loss_with_0_1_weights_is_the_hard_label_loss(spec):
    emb, labels = _batch()
    loss = LOSSES.build(spec)
    assert isinstance(loss, LabelWeightedLoss)
    a = emb.clone().requires_grad_(True)
    hard = loss(a, labels)
    (hard_grad,) = torch.autograd.grad(hard, a)
    b = emb.clone().requires_grad_(True)
    same = labels[:, None] == labels[None, :]
    other = ~torch.eye(len(labels), dtype=torch.bool)
    weighted = loss.weighted_loss(loss.pair_values(b, b), (same & other).double(), (~same).double())
    (weighted_grad,) = torch.autograd.grad(weighted, b)
    torch.testing.assert_close(weighted, hard, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(weighted_grad, hard_grad, rtol=1e-10, atol=1e-14)
    # the row-by-row form of the same pairs (Metrix's clean and mixed paths)
    c = emb.clone().requires_grad_(True)
    anchor, candidate = torch.nonzero(other, as_tuple=True)
    listed = loss.labelled(c, c, anchor, candidate, same[anchor, candidate].double())
    (listed_grad,) = torch.autograd.grad(listed, c)
    torch.testing.assert_close(listed, hard, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(listed_grad, hard_grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("variant", ["original", "thesis_generic"])
def test_proxy_anchor_weighted_with_0_1_weights_is_the_hard_label_loss(variant):
    emb, labels = _batch(seed=1)
    loss = LOSSES.build(
        {"proxy_anchor": {"variant": variant}}, embedding_dim=5, num_classes=4
    ).double()
    a = emb.clone().requires_grad_(True)
    hard = loss(a, labels)
    b = emb.clone().requires_grad_(True)
    one_hot = torch.nn.functional.one_hot(labels, 4).double()
    weighted = loss.weighted_loss(loss.cosines(b), one_hot, 1 - one_hot)
    torch.testing.assert_close(weighted, hard, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(
        torch.autograd.grad(weighted, b)[0], torch.autograd.grad(hard, a)[0], rtol=1e-10, atol=1e-14
    )


def test_ms_soft_mining_switches_agree():
    emb, labels = _batch(seed=2)
    off = LOSSES.build({"ms": {"mining": False}})(emb, labels)
    assert float(LOSSES.build({"ms": {"epsilon": None}})(emb, labels)) == float(off)
    assert not LOSSES.build({"ms": {"epsilon": None}}).mining


def test_base_defaults_stay_outside_metrix_and_the_recipe_fills_them_inside():
    c2, ms = LOSSES.build("contrastive"), LOSSES.build("ms")
    assert (c2.pos_margin, c2.neg_margin, c2.reduction) == (0.0, 0.3841, "avg_nonzero")
    assert (ms.alpha, ms.beta, ms.base, ms.epsilon, ms.mining) == (2.0, 50.0, 0.5, 0.1, True)
    assert LOSSES.build("proxy_anchor", embedding_dim=5, num_classes=4).variant == "original"

    def base(spec):
        return build_loss(
            {"metrix": {"loss": spec, "level": "embedding"}}, embedding_dim=5, num_classes=4
        ).base

    assert (
        base("contrastive").neg_margin,
        base("c2").neg_margin,
        base("contrastive").reduction,
    ) == (0.5, 0.5, "avg_nonzero")
    m = base("ms")
    assert (m.alpha, m.beta, m.base, m.epsilon, m.mining) == (17.97, 75.66, 0.77, 0.39, True)
    assert not base({"ms": {"mining": False}}).mining and not base({"ms": {"epsilon": None}}).mining
    assert (
        base({"ms": {"alpha": 18.0}}).alpha == 18.0 and base({"ms": {"alpha": 18.0}}).beta == 75.66
    )
    assert base("contrastive_similarity").margin == 0.5
    pa = base("proxy_anchor")
    assert (pa.alpha, pa.delta, pa.variant, pa.lr_multiplier) == (32.0, 0.1, "original", 100.0)
    assert set(RECIPE_DEFAULTS) == {type(LOSSES.build("c2")), type(LOSSES.build("ms"))}


@pytest.mark.parametrize(
    "spec, field",
    [
        (
            {"contrastive": {"reduction": "sum"}},
            r"loss\.loss\.reduction: unknown value 'sum'; allowed: avg_nonzero, mean, anchor_mean",
        ),
        (
            {"proxy_anchor": {"variant": "kim"}},
            r"loss\.loss\.variant: unknown variant 'kim'; allowed: original, thesis_generic",
        ),
        ("triplet", r"loss\.loss: must be a loss with label weights"),
    ],
)
def test_metrix_base_errors_name_the_wrapper_field(spec, field):
    with pytest.raises(ConfigError, match=field):
        build_loss({"metrix": {"loss": spec}}, embedding_dim=5, num_classes=4)


#: (loss value, sum of |d loss / d embeddings|) of embedding-level Metrix with lambda = 0.3,
#: computed by the former ``metrix_losses.MIXED_LOSSES`` implementation (commit fb1b6dd)
PINNED = {
    ("contrastive", "pos_neg"): (1.365309444662584, 1.6423787096830782),
    ("contrastive", "anc_neg"): (1.3432778925821875, 1.0961867622054369),
    ("ms", "pos_neg"): (1.359951056063526, 1.7058416759867883),
    ("ms", "anc_neg"): (1.1913737266669973, 1.6366775848611743),
    ("proxy_anchor", "pos_neg"): (59.93488778197876, 67.60659631040409),
    ("proxy_anchor", "anc_neg"): (59.93488778197876, 67.60659631040409),
    ("default", "pos_neg"): (1.365309444662584, 1.6423787096830782),
    ("default", "anc_neg"): (1.3432778925821875, 1.0961867622054369),
    ("ms_default", "pos_neg"): (1.359951056063526, 1.7058416759867883),
    ("ms_default", "anc_neg"): (1.1913737266669973, 1.6366775848611743),
    ("similarity", "pos_neg"): (-0.14252144175971207, 3.5294550234312156),
    ("similarity", "anc_neg"): (-0.3611621671674548, 2.6332974083460123),
    ("anchor_mean", "pos_neg"): (5.320988370328454, 2.920581137843194),
    ("anchor_mean", "anc_neg"): (3.5909792422388893, 2.1909477026042787),
    ("thesis_generic", "pos_neg"): (1.5929652666127638, 2.112705275044423),
    ("thesis_generic", "anc_neg"): (1.5929652666127638, 2.112705275044423),
}
#: the Metrix presets' base specs (src/gspdml/presets/metrix-*.yaml) and the recipe defaults
SPECS = {
    "contrastive": {"contrastive": {"pos_margin": 0.0, "neg_margin": 0.5}},
    "ms": {"ms": {"alpha": 17.97, "beta": 75.66, "base": 0.77, "epsilon": 0.39}},
    "proxy_anchor": {"proxy_anchor": {"alpha": 32.0, "delta": 0.1}},
    "default": "contrastive",
    "ms_default": "ms",
    "similarity": "contrastive_similarity",
    "anchor_mean": {"contrastive": {"reduction": "anchor_mean"}},
    "thesis_generic": {"proxy_anchor": {"variant": "thesis_generic"}},
}


@pytest.mark.parametrize("name, kind", sorted(PINNED))
def test_metrix_loss_and_gradient_are_those_of_the_former_mixed_losses(name, kind):
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(12, 5, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 0, 1, 2, 3])
    loss = build_loss(
        {"metrix": {"loss": SPECS[name], "level": "embedding"}}, embedding_dim=5, num_classes=4
    ).double()
    if hasattr(loss.base, "proxies"):
        loss.base.proxies.data.copy_(torch.randn(4, 5, generator=g, dtype=torch.float64))
    emb.requires_grad_(True)
    total = loss(emb, labels, kind=kind, lam=0.3)
    (grad,) = torch.autograd.grad(total, emb)
    value, grad_sum = PINNED[(name, kind)]
    assert float(total.detach()) == pytest.approx(value, rel=1e-12)
    assert float(grad.abs().sum()) == pytest.approx(grad_sum, rel=1e-12)


#: base specs without a former implementation, checked against loops instead
#: (tests/losses/test_metrix_proxynca.py)
LOOP_CHECKED = ({"proxynca_pp": {"lr_multiplier": 100.0, "mixed_targets": "generic"}},)


def test_every_metrix_preset_uses_a_pinned_base_spec():
    from pathlib import Path

    import yaml

    presets = Path(__file__).resolve().parents[2] / "src" / "gspdml" / "presets"
    found = 0
    for path in presets.glob("*.yaml"):
        loss = yaml.safe_load(path.read_text()).get("loss")
        if isinstance(loss, dict) and loss.get("name") == "metrix":
            assert loss["loss"] in (*SPECS.values(), *LOOP_CHECKED), path.name
            found += 1
    assert found >= 9
