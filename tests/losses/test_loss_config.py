import pytest
import torch
import yaml

from gspdml.config import PRESETS_DIR
from gspdml.errors import ConfigError
from gspdml.losses import LOSSES, WeightedSum, build_loss, check_loss

PRESETS = sorted((PRESETS_DIR / "losses").glob("*.yaml"))
SECTIONS = {"base", "data", "model", "loss", "optimizer", "schedule"}


def test_xbm_nested_in_a_weighted_list_with_a_proxy_loss(make_batch):
    spec = [
        {
            "xbm": {
                "base": {"c2": {"neg_margin": 1.0}},
                "memory_batches": 2,
                "start_step": 0,
                "fill_before_start": False,  # the XBM authors' rule: the memory is read from step 0
                "memory_weight": 3.0,
                "weight": 0.5,  # weight of the whole XBM term in the list
            }
        },
        {"name": "proxy_anchor", "delta": 0.1, "alpha": 32, "weight": 0.25},
    ]
    check_loss(spec)
    loss = build_loss(spec, num_classes=4, embedding_dim=8).double().train()
    assert isinstance(loss, WeightedSum) and loss.weights == [0.5, 0.25]
    xbm, proxy = loss.losses
    emb, labels = make_batch(seed=100)
    value = loss(emb, labels)
    c2 = LOSSES.build({"c2": {"neg_margin": 1.0}})
    expected = 0.5 * (1 + 3.0) * c2(emb, labels) + 0.25 * proxy(
        emb, labels
    )  # first step: memory == batch
    assert value.item() == pytest.approx(expected.item(), rel=1e-12)
    assert int(xbm.filled) == len(labels)
    # every parameter the trainer must optimise is reachable from the built loss
    assert [name for name, _ in loss.named_parameters()] == ["losses.1.proxies"]


def test_nested_spec_errors_name_the_full_field():
    with pytest.raises(ConfigError, match=r"loss\[0\]\.base\.neg_margn: unknown option for 'c2'"):
        check_loss([{"xbm": {"base": {"c2": {"neg_margn": 1.0}}}}, "c1"])
    with pytest.raises(ConfigError, match=r"loss\.base: unknown loss 'c3'"):
        check_loss({"xbm": {"base": "c3"}})


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"name": "zsr", "base": "c2", "class_init": "xavier"}, r"loss\[1\]\.class_init: "),
        (
            {"zsr": {"base": {"xbm": {"base": "c1", "memory_batches": 0}}}},
            r"loss\[1\]\.base\.memory_batches: ",
        ),
        ({"triplet": {"mining": "easy"}}, r"loss\[1\]\.mining: unknown mining"),
        ({"xbm": {"base": "proxy_anchor"}}, r"loss\[1\]\.base: must be a pair loss"),
        (
            {"xbm": {"base": {"c2": {"neg_margn": 1.0}}}},
            r"loss\[1\]\.base\.neg_margn: unknown option",
        ),
    ],
)
def test_a_bad_value_inside_a_loss_list_names_its_position(spec, field):
    """The loss's own check of a value (not the registry's of the option's type) names the item
    of the list, through a run config as through build_loss."""
    from gspdml.config import validated

    with pytest.raises(ConfigError, match=field):
        build_loss(["c1", spec], embedding_dim=8, num_classes=4)
    with pytest.raises(ConfigError, match=field):
        validated({"loss": ["c1", spec]})


def test_a_wrapper_inside_a_wrapper_names_the_whole_path():
    with pytest.raises(ConfigError, match=r"^loss\.base\.base: must be a pair loss"):
        build_loss(
            {"zsr": {"base": {"xbm": {"base": "proxy_anchor"}}}}, embedding_dim=8, num_classes=4
        )


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_preset_is_a_valid_config_fragment(path):
    preset = yaml.safe_load(path.read_text())
    assert set(preset) <= SECTIONS, f"{path.name}: unexpected sections {set(preset) - SECTIONS}"
    check_loss(preset["loss"])
    loss = build_loss(preset["loss"], num_classes=6, embedding_dim=8)
    data = preset["data"]
    assert data["classes_per_batch"] * data["samples_per_class"] >= 32
    if list(
        loss.parameters()
    ):  # proxy baselines: proxies get a learning-rate multiplier and a warm-up
        assert loss.lr_multiplier >= 100 and preset["schedule"]["warmup_steps"] > 0
    emb = torch.nn.functional.normalize(torch.randn(12, 8), dim=1)
    assert torch.isfinite(loss.train()(emb, torch.arange(6).repeat(2)))


def test_there_is_a_preset_per_baseline_loss_and_dataset():
    names = {p.stem for p in PRESETS}
    for loss in (
        "c1",
        "c2",
        "triplet",
        "ms",
        "proxy_anchor",
        "proxynca_pp",
        "soft_triple",
        "xbm-c1",
        "xbm-c2",
    ):
        for dataset in ("cub", "cars", "sop", "inshop"):
            assert f"{loss}-{dataset}" in names
