"""``data.dataset.resize`` and ``crop`` (the sizes of the training and evaluation transforms) are
bounded by :data:`gspdml.data.eval_transform.MAX_SIDE` when the config is checked, as
``data.eval_transform`` is: a run records the evaluation transform they make in its
``config.yaml`` as ``data.eval_transform``. Before, a run with a larger side trained and wrote a
``config.yaml`` that could no longer be read back (its recorded transform was refused)."""

from __future__ import annotations

import pytest

from gspdml.config import load_config
from gspdml.data.eval_transform import MAX_SIDE, parse_eval_transform
from gspdml.data.recipes import image_transform
from gspdml.errors import ConfigError
from tests.training.conftest import tiny_config


def _config(tmp_path, **sizes):
    dataset = {"name": "cub", "root": str(tmp_path / "cub"), "transform": "center", **sizes}
    return tiny_config(tmp_path, data={"dataset": dataset})


@pytest.mark.parametrize("option", ["resize", "crop"])
def test_a_side_above_max_side_is_refused_at_config_check(tmp_path, option):
    with pytest.raises(ConfigError) as refused:
        load_config(_config(tmp_path, **{option: MAX_SIDE + 1}))
    message = str(refused.value)
    assert message.startswith(f"data.dataset.{option}: {MAX_SIDE + 1} pixels")
    assert f"use at most {MAX_SIDE} pixels" in message


def test_the_largest_side_allowed_is_recorded_as_an_eval_transform_read_back(tmp_path):
    config = load_config(_config(tmp_path, resize=MAX_SIDE, crop=MAX_SIDE))
    assert config.data.dataset["resize"] == MAX_SIDE
    recorded = image_transform("center", resize=MAX_SIDE, crop=MAX_SIDE).describe()
    assert parse_eval_transform(recorded).resize == (MAX_SIDE,)
    # what one pixel more would record is what data.eval_transform refuses
    with pytest.raises(ConfigError, match=f"larger than {MAX_SIDE} pixels"):
        parse_eval_transform({**recorded, "resize": [MAX_SIDE + 1]})
