"""``data.eval_transform`` asking for images of 60,000 pixels a side: every image is allocated at
that size when it is embedded (about 14 GB of pixels each at the first encode). A config, a
received run's ``config.yaml`` and a bundle's ``preprocessing.json`` are refused by the one check
of the spec (``gspdml.data.eval_transform.MAX_SIDE``, 8192 pixels a side), naming the field, the
value and the fix. Before, only the bundle reader bounded it: a config and a received run (read
by ``gspdml evaluate``, ``index``, ``search``, ``export``) were accepted."""

import pytest
import yaml

from gspdml.config import load_config
from gspdml.data.eval_transform import MAX_SIDE, parse_eval_transform
from gspdml.errors import ConfigError
from gspdml.retrieval.encoder import load_model_and_transform
from tests.helpers.retrieval import EVAL_TRANSFORM, write_run

FIX = rf"use sizes of at most {MAX_SIDE} pixels"


def _config(eval_transform):
    return {
        "data": {
            "dataset": {"name": "image_folder", "root": "images"},
            "eval_transform": eval_transform,
        },
        "model": {"backbone": {"name": "small_cnn"}, "embedding_dim": 8},
    }


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"resize": 60000}, r"resize \[60000\]"),
        ({"resize": [224, 60000]}, r"resize \[224, 60000\]"),
        ({"center_crop": MAX_SIDE + 1}, rf"center_crop \[{MAX_SIDE + 1}, {MAX_SIDE + 1}\]"),
    ],
)
def test_a_config_asking_huge_images_is_refused_at_load(options, shown):
    with pytest.raises(ConfigError, match=rf"^data\.eval_transform: {shown} makes .*; {FIX}$"):
        load_config(_config({**EVAL_TRANSFORM, **options}))


def test_the_bound_itself_is_allowed():
    spec = {**EVAL_TRANSFORM, "resize": MAX_SIDE, "center_crop": [MAX_SIDE, 1]}
    assert parse_eval_transform(spec).output_size == (MAX_SIDE, 1)


def test_a_received_runs_huge_transform_is_refused_naming_its_config(tmp_path):
    write_run(tmp_path / "run")
    path = tmp_path / "run" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["data"]["eval_transform"]["resize"] = [60000]
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(
        ConfigError, match=rf"data\.eval_transform: {path}: resize \[60000\].*{FIX}"
    ):
        load_model_and_transform(tmp_path / "run", "cpu")
