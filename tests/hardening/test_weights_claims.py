"""A weights file whose metadata claims a model far larger than the tensors it holds (a few kB
file describing an embedding of 2**40 dimensions, or 2**30 input channels) is refused from the
claim's layout, built on PyTorch's meta device, before any real tensor is allocated. Before,
``load_embedder`` (``from_pretrained``, ``load_run``) built the claimed model first: the
allocation failed with a bare ``RuntimeError`` at best (tens of terabytes), and a claim just
under the machine's memory would have been allocated and filled."""

import pytest
import torch

from gspdml.config import load_config
from gspdml.models import build_embedder
from gspdml.training.checkpoint import CheckpointError, save_state
from gspdml.training.run_dir import load_embedder

MODEL = {"backbone": {"name": "small_cnn", "widths": [4, 8]}, "embedding_dim": 8}


def _weights(path, claim, channels=3):
    config = load_config({"model": MODEL})
    model = build_embedder(config.model.to_dict(), in_channels=3)
    recorded = {**config.model.to_dict(), **claim}
    save_state(path, model.state_dict(), {"in_channels": channels, "model": recorded})
    return path, model


@pytest.mark.parametrize(
    ("claim", "channels", "named"),
    [
        ({"embedding_dim": 2**40}, 3, r"projection\.weight: \(8, 8\) stored, \(1099511627776, 8\)"),
        ({}, 2**30, r"\(4, 3, 3, 3\) stored, \(4, 1073741824, 3, 3\) expected"),
    ],
)
def test_a_claimed_model_larger_than_the_stored_weights_is_refused_unbuilt(
    tmp_path, claim, channels, named
):
    path, _ = _weights(tmp_path / "model.safetensors", claim, channels)
    with pytest.raises(
        CheckpointError, match=r"model\.safetensors: its weights are not .*" + named
    ):
        load_embedder(path)


def test_weights_that_match_their_metadata_load_exactly(tmp_path):
    path, model = _weights(tmp_path / "model.safetensors", {})
    loaded, meta = load_embedder(path)
    assert meta["in_channels"] == 3
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
