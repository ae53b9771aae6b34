import pytest
import torch

from gspdml.training import checkpoint
from gspdml.training.checkpoint import CheckpointError, load_state, save_state


def test_round_trip_of_nested_state_with_int_keys_and_optimizer(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1, betas=(0.9, 0.99))
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    state = {
        "opt": opt.state_dict(),
        "nested": {1: [1.5, None, "x", float("inf")], "t": torch.arange(3)},
    }
    save_state(tmp_path / "c.safetensors", state, {"step": 7})
    loaded, meta = load_state(tmp_path / "c.safetensors")
    assert meta == {"step": 7}
    assert loaded["nested"][1] == [1.5, None, "x", float("inf")]
    assert torch.equal(loaded["nested"]["t"], torch.arange(3))
    opt2 = torch.optim.Adam(torch.nn.Linear(3, 2).parameters(), lr=0.5)
    opt2.load_state_dict(loaded["opt"])
    assert opt2.param_groups[0]["lr"] == 0.1 and tuple(opt2.param_groups[0]["betas"]) == (0.9, 0.99)
    assert torch.equal(
        opt2.state[opt2.param_groups[0]["params"][0]]["exp_avg"],
        opt.state[opt.param_groups[0]["params"][0]]["exp_avg"],
    )


def test_a_failed_write_leaves_the_previous_checkpoint_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    save_state(path, {"w": torch.ones(2)})

    def disk_full(tensors, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "save_file", disk_full)
    with pytest.raises(OSError, match="No space"):
        save_state(path, {"w": torch.zeros(2)})
    assert torch.equal(load_state(path)[0]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["c.safetensors"]


def test_refuses_files_that_are_not_gspdml_checkpoints(tmp_path):
    bogus = tmp_path / "x.safetensors"
    bogus.write_bytes(b"\x80\x04not a safetensors file")
    with pytest.raises(CheckpointError, match="x.safetensors"):
        load_state(bogus)
    with pytest.raises(CheckpointError, match="not found"):
        load_state(tmp_path / "missing.safetensors")
    from safetensors.torch import save_file

    save_file({"a": torch.ones(1)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(CheckpointError, match="not a gspdml checkpoint"):
        load_state(tmp_path / "plain.safetensors")
