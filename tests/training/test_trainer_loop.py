import dataclasses
import json

import pytest
import torch
from torch import nn

from gspdml.config import load_config
from gspdml.errors import TrainingError
from gspdml.losses import MetricLoss
from gspdml.retrieval.figures import curve_series
from gspdml.retrieval.report_tables import weights_step
from gspdml.training import Trainer, build_run, load_run
from gspdml.training.checkpoint import load_state


def with_loss(config, make_loss):
    """The parts of ``config`` with a test loss injected (no registry entry needed)."""
    parts = build_run(config)
    loss = make_loss(parts.model.embedding_dim, parts.data.num_classes)
    return dataclasses.replace(parts, loss=loss)


class ProxyCE(MetricLoss):
    """A proxy loss owning parameters with a x100 learning rate (test only)."""

    def __init__(self, embedding_dim, num_classes, lr_multiplier=100.0, scale=1.0):
        super().__init__()
        self.proxies = nn.Parameter(torch.randn(num_classes, embedding_dim))
        self.lr_multiplier, self.scale = lr_multiplier, scale

    def forward(self, embeddings, labels, output=None):
        return nn.functional.cross_entropy(self.scale * embeddings @ self.proxies.T, labels)


def test_every_parameter_is_optimised_with_its_multiplier_and_warmup_freezes_the_backbone(
    tmp_path, make_config
):
    config = load_config(
        make_config(
            schedule={"max_steps": 6, "warmup_steps": 3},
            optimizer={"lr": 1e-3, "lr_multipliers": {"head": 2.0}},
            model={"head": "local"},
        )
    )
    trainer = Trainer(with_loss(config, ProxyCE), config, tmp_path / "run")
    groups = {g["name"]: g for g in trainer.optimizer.param_groups}
    assert groups["head"]["lr"] == pytest.approx(2e-3)
    assert groups["loss x100"]["lr"] == pytest.approx(0.1)
    assert groups["loss x100"]["params"][0] is trainer.loss.proxies

    backbone0 = [p.detach().clone() for p in trainer.model.backbone.parameters()]
    head0 = trainer.model.head.weight.detach().clone()
    proxies0 = trainer.loss.proxies.detach().clone()
    loader = iter(trainer._loader())
    for _ in range(3):
        trainer._train_step(*next(loader))
    assert all(torch.equal(a, b) for a, b in zip(backbone0, trainer.model.backbone.parameters()))
    assert not torch.equal(head0, trainer.model.head.weight)
    assert not torch.equal(proxies0, trainer.loss.proxies)
    trainer._train_step(*next(loader))
    assert not all(
        torch.equal(a, b) for a, b in zip(backbone0, trainer.model.backbone.parameters())
    )


def test_early_stopping_restores_the_best_weights(tmp_path, make_config):
    # lr so large that validation quickly stops improving
    config = load_config(
        make_config(
            optimizer={"lr": 0.5},
            schedule={"max_steps": 200},
            evaluation={"every": 2, "patience": 2},
        )
    )
    results = Trainer.from_config(config, tmp_path / "run").fit()
    assert results["stopped_early"] and results["steps"] < 200
    records = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    val = [r for r in records if r["split"] == "val"]
    best = max(val, key=lambda r: r["map_at_r"])
    assert results["best_step"] == best["step"] and results["best_map_at_r"] == pytest.approx(
        best["map_at_r"]
    )
    assert val[-1]["step"] - results["best_step"] == 2 * 2
    # the saved weights and the test metrics are of the best round, and say so (the report draws
    # the test marker there, not at the last step)
    test = [r for r in records if r["split"] == "test"]
    assert results["weights_step"] == results["best_step"] < results["steps"] == test[0]["step"]
    assert test[0]["weights_step"] == results["best_step"]
    marker = curve_series(records, weights_step(results, config.evaluation.restore_best))[
        ("test", "map_at_r")
    ]
    assert marker == [(results["best_step"], results["test"]["map_at_r"])]
    # rounds and the test split score the default metrics (bounded depth), and results.json says
    # which it computed: the whole-ranking mAP and MRR only when evaluation.metrics names them
    assert all("mean_average_precision" not in r and "map_at_r" in r for r in val)
    assert "mean_average_precision" not in results["test"] and "map_at_r" in results["test"]
    computed = results["test_metrics"]
    assert "map_at_r" in computed["computed"]
    assert {"mean_average_precision", "mean_reciprocal_rank"} <= set(computed["not_computed"])
    best_state, _ = load_state(tmp_path / "run" / "checkpoints" / "best.safetensors")
    _, model = load_run(tmp_path / "run")
    for key, value in model.state_dict().items():
        assert torch.equal(value, best_state[key]), key


def test_plateau_halves_the_learning_rate(tmp_path, make_config):
    config = load_config(
        make_config(
            optimizer={"lr": 0.5},
            schedule={"max_steps": 16, "plateau": {"factor": 0.5, "patience": 1}},
            evaluation={"every": 2, "patience": None},
        )
    )
    trainer = Trainer.from_config(config, tmp_path / "run")
    trainer.fit()
    drops = len(trainer.schedules.plateau.drops)
    assert drops >= 1
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * 0.5**drops)


class NanAfter(MetricLoss):
    def __init__(self, steps: int = 7):
        super().__init__()
        self.steps, self.calls = steps, 0

    def forward(self, embeddings, labels, output=None):
        self.calls += 1
        value = (embeddings**2).sum() * 0.0 + 1.0
        return value * float("nan") if self.calls > self.steps else value


def test_non_finite_loss_stops_with_a_message_and_the_last_checkpoint_intact(tmp_path, make_config):
    config = load_config(make_config(evaluation={"every": 5, "patience": None}))
    parts = with_loss(config, lambda dim, classes: NanAfter(steps=7))
    trainer = Trainer(parts, config, tmp_path / "run")
    with pytest.raises(TrainingError, match="non-finite loss .* step 8.*intact"):
        trainer.fit()
    state, meta = load_state(tmp_path / "run" / "checkpoints" / "last.safetensors")
    assert meta["step"] == 5 and state["trainer"]["step"] == 5


@pytest.mark.parametrize("fresh", [False, True])
def test_warmup_switch_fresh_optimizer_and_no_rounds_in_the_warmup(tmp_path, make_config, fresh):
    """ProxyNCA++'s train.py: a new Adam after the warm-up (schedule.fresh_optimizer_after_warmup:
    the moments and step counts start again) and validation after main epochs only
    (evaluation.during_warmup: false: rounds every `every` steps from the end of the warm-up)."""
    config = load_config(
        make_config(
            schedule={"max_steps": 9, "warmup_steps": 4, "fresh_optimizer_after_warmup": fresh},
            evaluation={"every": 2, "patience": None, "during_warmup": False},
        )
    )
    trainer = Trainer.from_config(config, tmp_path / "run")
    trainer.fit()
    first = {g["name"]: g["params"][0] for g in trainer.optimizer.param_groups}
    head_step = trainer.optimizer.state[first.get("head", first.get("projection"))]["step"]
    backbone_step = trainer.optimizer.state[first["backbone"]]["step"]
    assert (int(head_step), int(backbone_step)) == ((5, 5) if fresh else (9, 5))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["step"] for r in records if r["split"] == "val"] == [6, 8, 9]
