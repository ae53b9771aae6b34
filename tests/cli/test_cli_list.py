"""``gspdml list``: every registered name and shipped preset, aliases marked, filtered."""

import json
import re

import pytest

from gspdml.cli import main
from gspdml.config import preset_names
from gspdml.losses import LOSSES
from gspdml.pooling import POOLINGS


def _listed(capsys, *argv):
    assert main(["list", *argv, "--json"]) == 0
    return {row["name"]: row["summary"] for row in json.loads(capsys.readouterr().out)}


def test_every_registered_pooling_and_loss_is_listed_with_its_summary(capsys):
    poolings = _listed(capsys, "poolings")
    assert sorted(poolings) == POOLINGS.names()
    assert poolings["gap"].startswith("Global average pooling")
    losses = _listed(capsys, "losses")
    assert sorted(losses) == LOSSES.names()
    assert losses["contrastive"] == "alias of c2" and not losses["c2"].startswith("alias")


def test_presets_are_listed_and_a_pattern_filters(capsys):
    assert sorted(_listed(capsys, "presets")) == preset_names()
    demos = _listed(capsys, "presets", "demo-g*")
    assert set(demos) == {"demo-gap", "demo-gem", "demo-gmp", "demo-gsp", "demo-gsp-zsr"}
    assert "generalized sum pooling" in demos["demo-gsp"]


def test_the_plain_listing_aligns_names(capsys):
    assert main(["list", "backbones", "resnet*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("resnet") for line in lines)
    assert len({re.match(r"\S+\s+", line).end() for line in lines if " " in line}) == 1


def test_an_unknown_kind_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["list", "optimizers"])
    assert stop.value.code == 2 and "invalid choice: 'optimizers'" in capsys.readouterr().err


def test_every_metric_is_listed_with_its_depth_and_cost_class(capsys):
    from gspdml.evaluation.metric_registry import METRICS

    metrics = _listed(capsys, "metrics")
    assert sorted(metrics) == sorted(METRICS)
    assert metrics["map_at_r"].startswith("bounded; cost: kNN search to depth R_i; default")
    assert metrics["map_at_k"].startswith("per-k; cost: kNN search to depth K; when named")
    assert "pytorch-metric-learning" in metrics["map_at_k"]
    whole = metrics["mean_average_precision"]
    assert whole.startswith("whole ranking; cost: every query-reference pair")
    assert metrics["nmi"].startswith("clustering; cost: k-means")
    assert set(_listed(capsys, "metrics", "mrr*")) == {"mrr_at_k"}
