"""Each component of a run is built once: the config check refuses bad options from their
declarations (ranges, ``check_options``) without building the pooling or a loss."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.losses.contrastive import C2Contrastive
from gspdml.losses.triplet import TripletMargin
from gspdml.pooling import build_pooling
from gspdml.pooling.power_means import GeM
from gspdml.training import Trainer
from tests.training.conftest import tiny_config


@pytest.fixture()
def builds(monkeypatch):
    """Constructions of the run's pooling and losses, by class."""
    counts: Counter[str] = Counter()
    for cls in (GeM, C2Contrastive, TripletMargin):
        monkeypatch.setattr(cls, "__init__", _counted(cls.__init__, cls.__name__, counts))
    return counts


def _counted(init, name, counts):
    @functools.wraps(init)  # the same signature: the registry passes the same arguments
    def counted(self, *args, **kwargs):
        counts[name] += 1
        init(self, *args, **kwargs)

    return counted


def test_a_run_builds_its_pooling_and_each_loss_once(builds, tmp_path):
    config = load_config(
        tiny_config(
            tmp_path,
            model={"pooling": {"gem": {"p": 2.0}}},
            loss=[{"c2": {"neg_margin": 0.5}}, {"name": "triplet", "weight": 0.5}],
            schedule={"max_steps": 2},
            evaluation={"every": 10},
        )
    )
    Trainer.from_config(config, tmp_path / "run").fit()
    assert builds == {"GeM": 1, "C2Contrastive": 1, "TripletMargin": 1}


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"model": {"pooling": {"gem": {"p": 0}}}},
            r"^model\.pooling\.p: must be positive, got 0$",
        ),
        (
            {"loss": ["c2", {"xbm": {"base": "c2", "memory_batches": 0}}]},
            r"^loss\[1\]\.memory_batches: must be >= 1, got 0$",
        ),
    ],
)
def test_a_value_out_of_its_declared_range_is_refused_without_a_build(
    builds, tmp_path, overrides, message
):
    with pytest.raises(ConfigError, match=message):
        load_config(tiny_config(tmp_path, **overrides))
    assert not builds


def test_a_component_built_from_python_checks_the_same_declaration():
    with pytest.raises(ConfigError, match=r"^model\.pooling\.p: must be positive, got -1\.0$"):
        GeM(8, p=-1.0)
    with pytest.raises(ConfigError, match=r"^model\.pooling\.p: must be positive, got -1$"):
        build_pooling({"gem": {"p": -1}}, 8)
