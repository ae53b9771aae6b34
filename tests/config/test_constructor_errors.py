"""A component's constructor that fails on the options a config gives it (a ``ValueError``,
``TypeError`` or ``RuntimeError``) is a ``gspdml: error`` naming the config field, the component
and the original message, for the library's own components as for a plugin's; before, only a
component outside ``gspdml.*`` was named and the library's raised a raw traceback (issue 40 #3:
``loss: xbm`` without its ``base`` loss gave ``TypeError: CrossBatchMemory.__init__() missing 1
required positional argument: 'base'``). The original exception stays chained."""

import pytest
import yaml

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.pooling import POOLINGS
from gspdml.pooling.simple import GAP
from tests.helpers.images import folder_config
from tests.helpers.retrieval import register_for_test

XBM_ERROR = (
    "loss 'xbm' (gspdml.losses.xbm.CrossBatchMemory) failed: TypeError: "
    "CrossBatchMemory.__init__() missing 1 required positional argument: 'base'"
)


def _config(tmp_path, **changes):
    return {**folder_config(tmp_path / "images", tmp_path / "runs"), **changes}


@pytest.mark.parametrize(
    ("loss", "field"),
    [({"name": "xbm"}, "loss"), ([{"name": "c2"}, {"name": "xbm", "weight": 0.5}], "loss[1]")],
)
def test_a_library_loss_that_fails_to_build_names_the_field_and_the_component(
    tmp_path, loss, field
):
    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, loss=loss))
    assert str(err.value) == f"{field}: {XBM_ERROR}"
    cause = err.value.__cause__
    assert isinstance(cause, TypeError) and "'base'" in str(cause)  # the traceback is kept
    assert cause.__traceback__ is not None


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
