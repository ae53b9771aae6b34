"""``key.sub=value`` overrides anywhere on a command line, also right after an option that
takes several values (``--seeds 0 1 trainer.progress=false`` was "invalid int value")."""

from __future__ import annotations

import pytest

from gspdml.cli import build_parser, parse


@pytest.mark.parametrize(
    "argv, seeds",
    [
        (["protocol", "fair", "demo-gsp", "--seeds", "0", "1", "trainer.progress=false"], [0, 1]),
        (["protocol", "fair", "trainer.progress=false", "demo-gsp", "--seeds", "0", "1"], [0, 1]),
        (["protocol", "fair", "demo-gsp", "trainer.progress=false"], [0, 1, 2]),
    ],
)
def test_overrides_after_a_many_valued_option_or_before_a_positional(argv, seeds):
    args = parse(build_parser(), argv)
    assert args.seeds == seeds and args.config == "demo-gsp"
    assert args.overrides == ["trainer.progress=false"]


def test_reproduce_and_train_take_overrides_anywhere():
    argv = ["reproduce", "gsp-table1", "--seeds", "0", "schedule.max_steps=8", "--rows", "cub/*"]
    args = parse(build_parser(), argv)
    assert (args.seeds, args.rows, args.overrides) == ([0], ["cub/*"], ["schedule.max_steps=8"])
    args = parse(build_parser(), ["train", "demo-gsp", "--no-progress", "model.pooling.mu=0.2"])
    assert args.overrides == ["model.pooling.mu=0.2"]


def test_a_command_without_overrides_still_reports_the_word(capsys):
    with pytest.raises(SystemExit):
        parse(build_parser(), ["doctor", "trainer.progress=false"])
    assert "unrecognized arguments: trainer.progress=false" in capsys.readouterr().err
