"""Pretrained-weight lookup and loading: offline, immediate, with errors that name the file."""

import time

import pytest
import torch
from safetensors.torch import save_file

from gspdml.errors import DataError
from gspdml.models.backbones import build_backbone
from gspdml.models.backbones.timm_backbone import import_timm
from gspdml.models.pretrained import WeightsNotFoundError, load_weights, read_state_dict


@pytest.mark.parametrize(
    "spec, filename",
    [
        ({"name": "bn_inception", "pretrained": True}, "bn_inception-52deb4733.pth"),
        ({"name": "resnet50", "pretrained": True}, "resnet50-0676ba61.pth"),
    ],
)
def test_missing_torch_hub_weights_fail_at_once_naming_file_and_folder(
    spec, filename, tmp_path, monkeypatch
):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    start = time.perf_counter()
    with pytest.raises(WeightsNotFoundError) as error:
        build_backbone(spec, 3)
    assert time.perf_counter() - start < 2.0
    message = str(error.value)
    assert message.startswith("model.backbone.pretrained:")
    assert filename in message and str(tmp_path / "hub" / "checkpoints") in message


def test_missing_timm_weights_fail_at_once_without_network(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    import_timm()  # the one-off import cost is not what is timed
    start = time.perf_counter()
    with pytest.raises(WeightsNotFoundError) as error:
        build_backbone({"name": "timm", "model": "resnet18", "pretrained": True}, 3)
    assert time.perf_counter() - start < 2.0
    message = str(error.value)
    assert (
        "timm/resnet18" in message and "model.safetensors" in message and str(tmp_path) in message
    )


def test_timm_weights_are_found_in_the_hugging_face_cache_and_loaded(tmp_path, monkeypatch):
    import huggingface_hub.constants
    import timm

    torch.manual_seed(0)
    source = timm.create_model("resnet18")
    hub_id = timm.models.get_pretrained_cfg("resnet18").hf_hub_id
    folder = tmp_path / ("models--" + hub_id.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0" * 40)
    (folder / "snapshots" / ("0" * 40)).mkdir(parents=True)
    save_file(source.state_dict(), str(folder / "snapshots" / ("0" * 40) / "model.safetensors"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))

    model = build_backbone({"name": "timm", "model": "resnet18", "pretrained": True}, 3).eval()
    source.eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(x), source.forward_features(x))


def test_path_weights_missing_or_mismatched_are_named(tmp_path):
    with pytest.raises(
        WeightsNotFoundError,
        match="model.backbone.pretrained: weights file .*nowhere.pth' does not exist",
    ):
        build_backbone({"name": "resnet18", "pretrained": str(tmp_path / "nowhere.pth")}, 3)
    wrong = tmp_path / "resnet20.pth"
    torch.save(build_backbone("resnet20", 3).state_dict(), wrong)
    with pytest.raises(
        DataError,
        match=r"resnet20.pth: weights do not fit ResNet18: missing \d+ keys .*shape mismatch",
    ):
        build_backbone({"name": "resnet18", "pretrained": str(wrong)}, 3)


def test_read_state_dict_unwraps_checkpoints_and_safetensors(tmp_path):
    model = build_backbone("resnet20", 3)
    state = model.state_dict()
    torch.save(
        {"state_dict": {"module." + k: v for k, v in state.items()}, "epoch": 3},
        tmp_path / "wrapped.pth",
    )
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "plain.safetensors"))
    for name in ("wrapped.pth", "plain.safetensors"):
        loaded = read_state_dict(tmp_path / name)
        assert loaded.keys() == state.keys() and all(
            torch.equal(loaded[k], state[k]) for k in state
        )
    (tmp_path / "broken.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(DataError, match="broken.pth: cannot read weights"):
        read_state_dict(tmp_path / "broken.pth")


def test_load_weights_reshapes_only_leading_singleton_axes():
    model = build_backbone("resnet20", 3)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["bn1.weight"] = torch.full((1, 16), 2.0)
    load_weights(model, state, source="mem")
    assert torch.equal(model.bn1.weight, torch.full((16,), 2.0))
    state["bn1.weight"] = torch.full((16, 1), 2.0)
    with pytest.raises(
        DataError,
        match=r"mem: .*shape mismatch for 1 keys \(e.g. bn1.weight \(16, 1\) vs \(16,\)\)",
    ):
        load_weights(model, state, source="mem")
