"""A component's constructor that fails on the options a config gives it (a ``ValueError``,
``TypeError`` or ``RuntimeError``) is a ``gspdml: error`` naming the config field, the component
and the original message, for the library's own components as for a plugin's; before, only a
component outside ``gspdml.*`` was named and the library's raised a raw traceback (issue 40 #3).
The original exception stays chained. A required option that the config leaves out (``loss:
xbm`` without its ``base`` loss, which gave ``TypeError: CrossBatchMemory.__init__() missing 1
required positional argument: 'base'``) is refused when the config is checked, before any build."""

import pytest
import torch
import yaml

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.losses import LOSSES
from gspdml.pooling import POOLINGS
from gspdml.pooling.simple import GAP
from tests.helpers.images import folder_config, image_folder
from tests.helpers.retrieval import register_for_test


def _config(tmp_path, **changes):
    return {**folder_config(tmp_path / "images", tmp_path / "runs"), **changes}


@pytest.mark.parametrize(
    ("loss", "field"),
    [({"name": "xbm"}, "loss"), ([{"name": "c2"}, {"name": "xbm", "weight": 0.5}], "loss[1]")],
)
def test_a_required_option_left_out_is_named_when_the_config_is_checked(tmp_path, loss, field):
    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, loss=loss))
    assert str(err.value) == f"{field}.base: 'xbm' needs this option (no default)"


class Broken(GAP):
    """A pooling of the library (by its module) whose constructor fails at run time."""

    def __init__(self, in_channels: int, size: int = 2):
        super().__init__(in_channels)
        raise RuntimeError(f"cannot allocate {size} slots")


Broken.__module__ = "gspdml.pooling.simple"
Broken.__qualname__ = "Broken"


def test_a_library_pooling_that_fails_to_build_is_a_gspdml_error_on_the_command_line(
    tmp_path, monkeypatch, capsys
):
    image_folder(tmp_path / "images", {"a": 4, "b": 4}, {"c": 3, "d": 3})
    register_for_test(monkeypatch, POOLINGS, "broken_for_test", Broken)
    monkeypatch.setitem(POOLINGS._primary, "broken_for_test", "broken_for_test")
    config = _config(
        tmp_path, model={"backbone": "small_cnn", "pooling": {"name": "broken_for_test"}}
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        "gspdml: error: model.pooling: pooling 'broken_for_test' "
        f"({Broken.__module__}.{Broken.__qualname__}) failed: RuntimeError: cannot allocate 2 slots"
    ) in err


class BrokenLoss(torch.nn.Module):
    """A loss of the library (by its module) whose constructor refuses its options at run time."""

    def __init__(self, margin: float = 0.5):
        super().__init__()
        raise ValueError(f"margin {margin} leaves no room")


BrokenLoss.__module__ = "gspdml.losses.contrastive"
BrokenLoss.__qualname__ = "BrokenLoss"


def test_a_library_loss_that_fails_to_build_names_the_field_and_keeps_the_cause(monkeypatch):
    register_for_test(monkeypatch, LOSSES, "broken_loss_for_test", BrokenLoss)
    with pytest.raises(ConfigError) as err:
        LOSSES.build({"name": "broken_loss_for_test"}, "loss[1]")
    assert str(err.value) == (
        "loss[1]: loss 'broken_loss_for_test' "
        f"({BrokenLoss.__module__}.{BrokenLoss.__qualname__}) failed: "
        "ValueError: margin 0.5 leaves no room"
    )
    cause = err.value.__cause__
    assert isinstance(cause, ValueError) and cause.__traceback__ is not None
