"""Shared helpers of the experiment scripts: statistics, derived configs, failed runs."""

import json
import statistics

import pytest

from gspdml.config import dump_config, load_config
from gspdml.errors import ConfigError
from gspdml.training.config_changes import config_differences
from tests.helpers.experiments import load_common

common = load_common()


def test_mean_std_is_the_sample_statistics():
    values = [61.25, 58.5, 63.0]
    assert common.mean_std(values) == pytest.approx(
        (statistics.fmean(values), statistics.stdev(values))
    )
    assert common.mean_std([7.0]) == (7.0, 0.0)


def test_summary_and_cell_report_finished_and_diverged_runs():
    results = [
        {"seed": 0, "seconds": 2.0, "steps": 5, "test": {"map_at_r": 0.25}},
        {"seed": 1, "seconds": 3.0, "steps": 5, "test": {"map_at_r": 0.35}},
        {"seed": 2, "seconds": 1.0, "failed": "non-finite loss (nan) at step 3"},
    ]
    entry = common.summary(results, ["map_at_r"])
    assert entry["map_at_r"]["values"] == pytest.approx([25.0, 35.0])
    assert entry["seconds"] == 6.0 and list(entry["failed"]) == [2]
    assert (
        common.cell(entry, "map_at_r")
        == f"30.00 ± {statistics.stdev([25.0, 35.0]):.2f} (1/3 diverged)"
    )
    assert common.cell(common.summary(results[2:], ["map_at_r"]), "map_at_r") == "diverged"
    assert common.cell(common.summary([], ["map_at_r"]), "map_at_r") == "-"  # no run (dry run)
    json.dumps(entry)  # the summary goes to results.json as is


def _changes(before, after):
    """``{dotted key: new value}`` of every key whose value differs between two configs."""
    return {key: new for key, (_, new) in config_differences(before, after).items()}


#: what the fine-tuning regime changes in a ``demo-*`` preset
FINETUNE = {
    "model.backbone.frozen": False,
    "model.cache_backbone_features": False,
    "optimizer.lr_multipliers.backbone": 0.1,
}
#: what ``--smoke`` changes in the papers' regime
SMOKE = {
    "data.dataset.images_per_class": 4,
    "schedule.max_steps": 2,
    "evaluation.every": 2,
    "model.backbone.name": "small_cnn",
    "model.backbone.widths": [8, 16],
    "model.backbone.weights": "smoke-small_cnn-digits",
}


def test_derived_configs_are_the_preset_plus_exactly_the_intended_changes():
    preset = common.preset("demo-gsp")
    assert preset == load_config("demo-gsp") and common.preset("demo-gsp") is preset  # read once
    assert _changes(preset, common.finetuned(preset)) == FINETUNE
    regime = common.papers_regime("demo-gsp")
    assert _changes(preset, regime) == {"trainer.progress": False}
    assert _changes(regime, common.papers_regime("demo-gsp", smoke=True)) == SMOKE
    assert _changes(regime, common.with_steps(regime, 120, every=40)) == {
        "schedule.max_steps": 120,
        "evaluation.every": 40,
    }
    assert _changes(regime, common.REGIMES["frozen"](regime)) == {}
    assert _changes(regime, common.REGIMES["finetune"](regime)) == FINETUNE
    assert _changes(regime, common.named(regime, "probe")) == {"name": "probe"}
    assert preset.model.backbone["frozen"] is True and preset.trainer.progress  # left unchanged


def test_options_update_a_spec_and_a_name_starts_a_new_one():
    gsp = common.preset("demo-gsp")
    assert _changes(gsp, common.with_pooling(gsp, mu=0.5, eps=5.0)) == {
        "model.pooling.mu": 0.5,
        "model.pooling.eps": 5.0,
    }
    assert common.with_pooling(gsp, name="gap").model.pooling == {"name": "gap"}  # no GSP options
    assert gsp.loss["name"] == "c2"  # the preset's loss, updated in one option
    assert common.with_loss(gsp, neg_margin=0.4).loss == {**gsp.loss, "neg_margin": 0.4}
    assert common.with_backbone(gsp, weights="resnet20-fashion").model.backbone == {
        "name": "resnet20",
        "weights": "resnet20-fashion",
        "frozen": True,
    }
    fashion = common.with_dataset(gsp, name="collage_shared", source="fashion", tile_size=28)
    assert fashion.data.dataset == {"name": "collage_shared", "source": "fashion", "tile_size": 28}
    resolved = common.named(fashion, "f").data.dataset  # the reader's defaults for the rest
    assert resolved == {**gsp.data.dataset, "source": "fashion", "tile_size": 28}


def test_the_typed_derivation_equals_the_override_strings_it_replaced():
    """The smoke-sized, fine-tuned papers' regime as the experiments built it before, from override
    strings: the same config."""
    overrides = [
        "trainer.progress=false",
        "data.dataset.images_per_class=4",
        "evaluation.every=2",
        "schedule.max_steps=2",
        (
            "model.backbone={name: small_cnn, widths: [8, 16], "
            "weights: smoke-small_cnn-digits, frozen: true}"
        ),
        "model.backbone.frozen=false",
        "model.cache_backbone_features=false",
        "optimizer.lr_multipliers.backbone=0.1",
        "model.pooling.mu=0.5",
        "name=probe",
    ]
    derived = common.finetuned(common.papers_regime("demo-gsp", smoke=True))
    derived = common.with_pooling(derived, mu=0.5)
    assert common.named(derived, "probe") == load_config("demo-gsp", overrides)


def test_named_checks_the_derived_config_again():
    regime = common.papers_regime("demo-gsp")
    with pytest.raises(ConfigError, match=r"schedule\.max_steps: expected an integer >= 1, got 0"):
        common.named(common.with_steps(regime, 0, every=10), "probe")
    with pytest.raises(ConfigError, match=r"model\.pooling\.mu: the transported fraction"):
        common.named(common.with_pooling(regime, mu=0.0), "probe")
    with pytest.raises(ConfigError, match=r"model\.cache_backbone_features: needs a frozen"):
        common.named(common.with_backbone(regime, frozen=False), "probe")
    with pytest.raises(ConfigError, match="name: expected a non-empty name without '/', got 'a/b'"):
        common.named(regime, "a/b")


def _probe(steps):
    """A from-scratch preset trained for ``steps`` steps, evaluated once."""
    cfg = common.with_steps(common.preset("scratch-gap.yaml"), steps, every=steps)
    return common.named(cfg, "probe")


def test_train_seeds_reuses_only_finished_runs_with_the_same_config(monkeypatch, tmp_path):
    """The runner's reuse rule (gspdml.workflows.runner) with --reuse; from scratch without it."""

    import gspdml.training
    from gspdml.errors import TrainingError

    calls = []

    def fake_train(cfg, run_dir, **kwargs):
        calls.append((cfg.seed, cfg.schedule.max_steps))
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text(dump_config(cfg))
        if cfg.schedule.max_steps == 9:
            raise TrainingError("non-finite loss (nan) at step 4; training stopped")
        results = {"steps": cfg.schedule.max_steps, "test": {"map_at_r": 0.1 * (1 + cfg.seed)}}
        (run_dir / "results.json").write_text(json.dumps(results))
        return results

    monkeypatch.setattr(gspdml.training, "train", fake_train)
    cfg = _probe(3)
    first = common.train_seeds(cfg, [0, 1], tmp_path)
    assert calls == [(0, 3), (1, 3)] and [r["test"]["map_at_r"] for r in first] == [0.1, 0.2]
    assert common.train_seeds(cfg, [0, 1], tmp_path, reuse=True) == json.loads(json.dumps(first))
    assert len(calls) == 2  # nothing retrained
    common.train_seeds(cfg, [1], tmp_path)
    assert calls[-1] == (1, 3)  # without reuse: retrained
    longer = _probe(5)
    with pytest.raises(
        ConfigError, match="holds a run of another config .*schedule.max_steps.*run without --reuse"
    ):
        common.train_seeds(
            longer, [0], tmp_path, reuse=True
        )  # the config changed: refused, never overwritten
    assert calls[-1] == (1, 3)
    common.train_seeds(longer, [0], tmp_path)
    assert calls[-1] == (0, 5)  # without reuse: retrained with the new config
    failed = common.train_seeds(_probe(9), [0], tmp_path)
    assert failed[0]["failed"] == "non-finite loss (nan) at step 4" and "test" not in failed[0]


def _slow_rows(runs):
    import time

    time.sleep(0.05)  # widens the read-merge-write window
    return [{"keys": sorted(runs)}]


def _publish_key(key):
    common.publish("toy", key, {"seconds": 1.0}, _slow_rows)


def test_processes_publishing_other_keys_at_once_keep_all_of_them(tmp_path, monkeypatch):
    import multiprocessing

    monkeypatch.setattr(common, "ROOT", tmp_path)  # inherited by the forked processes
    (tmp_path / "experiments" / "toy").mkdir(parents=True)
    keys = [f"key{k}" for k in range(6)]
    with multiprocessing.get_context("fork").Pool(len(keys)) as pool:
        pool.map(_publish_key, keys)
    stored = json.loads((tmp_path / "experiments" / "toy" / "results.json").read_text())
    assert sorted(stored["runs"]) == keys and stored["reproduction"] == [{"keys": keys}]
