"""Command-line traps of the practitioner journey: abbreviated options, overrides after an option,
a mistyped preset, key or component name."""

import pytest

from gspdml.cli import main


def _error(capsys, *argv):
    with pytest.raises(SystemExit) as stop:
        main(list(argv))
    assert stop.value.code == 2
    return capsys.readouterr().err


def test_an_abbreviated_option_is_refused_not_taken_for_another(capsys):
    """``--resum`` was silently taken as ``--resume`` (argparse abbreviations)."""
    err = _error(capsys, "train", "demo-gap", "--resum")
    assert "unrecognized arguments: --resum" in err


def test_overrides_are_read_after_an_option(capsys):
    """``gspdml train demo-gap --no-progress key=value`` failed with "unrecognized arguments"; the
    override now reaches the config (here a bad value, so nothing trains)."""
    assert main(["train", "demo-gap", "--no-progress", "model.head_bias=maybe"]) == 2
    assert "model.head_bias: expected true or false, got 'maybe'" in capsys.readouterr().err
    assert main(["config", "demo-gap", "--list", "seed=3"]) == 0  # --list ignores the config
    err = _error(capsys, "doctor", "seed=3")  # a command without overrides
    assert "unrecognized arguments: seed=3" in err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["config", "demo-gps"], "no preset named 'demo-gps'; did you mean 'demo-gsp'"),
        (
            ["config", "demo-gsp", "optimizer.lrr=1"],
            "optimizer.lrr: unknown key; did you mean 'lr'?",
        ),
        (["config", "demo-gsp", "model.pooling=gsq"], "unknown pooling 'gsq'; did you mean 'gsp'?"),
        ({"optimiser": {}}, "optimiser: unknown key; did you mean 'optimizer'?"),
    ],
)
def test_a_mistyped_name_gets_a_suggestion(tmp_path, capsys, argv, expected):
    if isinstance(argv, dict):
        import yaml

        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(argv))
        argv = ["config", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "demo-gsp-zsr, inshop" not in err  # no longer every preset name
