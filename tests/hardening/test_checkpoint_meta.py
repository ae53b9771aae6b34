"""A weights file whose gspdml header holds a ``meta`` that is not an object (a list, a string,
null, a number: written by another program or damaged) is a ``CheckpointError`` naming the file.
Before, ``read_weights`` (bundles, ``load_run``, ``gspdml index``) failed with a bare
``AttributeError`` ('list' object has no attribute 'get')."""

import json

import pytest
import torch
from safetensors.torch import save_file

from gspdml.training.checkpoint import FORMAT, CheckpointError, load_state
from gspdml.training.run_dir import read_weights

STRUCTURE = {"__dict__": [["w", {"__tensor__": "0"}]]}


def _write(path, meta):
    header = {"format": FORMAT, "structure": STRUCTURE, "meta": meta}
    save_file({"0": torch.ones(2)}, str(path), metadata={"gspdml": json.dumps(header)})
    return path


@pytest.mark.parametrize("meta", [[1], "x", None, 5])
def test_a_meta_that_is_not_an_object_is_refused_naming_the_file(tmp_path, meta):
    path = _write(tmp_path / "model.safetensors", meta)
    with pytest.raises(
        CheckpointError, match=r"model\.safetensors: malformed checkpoint .*meta is"
    ):
        read_weights(path)


def test_an_object_meta_is_read_back(tmp_path):
    state, meta = load_state(_write(tmp_path / "model.safetensors", {"in_channels": 3}))
    assert meta == {"in_channels": 3} and torch.equal(state["w"], torch.ones(2))
