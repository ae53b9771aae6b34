"""BN-Inception: against the `pretrainedmodels` (Cadene) module it must be key- and output-compatible with."""

import importlib.util
import os

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.models.backbones import build_backbone
from gspdml.models.backbones.bn_inception import BNInception


def cadene_bninception_module():
    """The reference module file of `pretrainedmodels` 0.7.4, loaded without its package
    (whose __init__ needs `six` and network-only dataset helpers)."""
    root = importlib.util.find_spec("pretrainedmodels").submodule_search_locations[0]
    spec = importlib.util.spec_from_file_location(
        "cadene_bninception", os.path.join(root, "models", "bninception.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def randomised_reference(seed=0):
    torch.manual_seed(seed)
    ref = cadene_bninception_module().BNInception().eval()
    with torch.no_grad():
        for name, buf in ref.named_buffers():
            if name.endswith("running_mean"):
                buf.normal_(0, 0.5)
            elif name.endswith("running_var"):
                buf.uniform_(0.5, 2.0)
        for name, p in ref.named_parameters():
            if name.endswith("_bn.weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("_bn.bias"):
                p.normal_(0, 0.2)
    return ref


def test_matches_cadene_bninception_features_with_its_checkpoint_layout(tmp_path, monkeypatch):
    ref = randomised_reference()
    # The published checkpoint stores BatchNorm vectors as [1, C] and includes the classifier.
    state = {
        k: (v.unsqueeze(0) if "_bn." in k and v.dim() == 1 else v)
        for k, v in ref.state_dict().items()
    }
    checkpoints = tmp_path / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)
    torch.save(state, checkpoints / "bn_inception-52deb4733.pth")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    model = build_backbone(
        {"name": "bn_inception", "pretrained": True, "input_space": "caffe"}, 3
    ).eval()
    ours = model.state_dict()
    assert set(ours) == {k for k in state if not k.startswith("last_linear.")}
    for key, value in ours.items():
        assert torch.equal(value, state[key].reshape(value.shape)), key

    x = torch.randn(1, 3, 96, 96) * 50
    with torch.no_grad():
        out = model(x)
        expected = ref.features(x.clone())
    assert out.shape == (1, 1024, 3, 3) and model.out_channels == 1024
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


def test_map_is_7x7_at_227_and_224_pixels():
    with torch.device("meta"):
        model = BNInception()
        for size in (227, 224):
            assert model(torch.empty(2, 3, size, size)).shape == (2, 1024, 7, 7)


def test_imagenet_input_space_equals_manual_caffe_conversion():
    torch.manual_seed(1)
    caffe = BNInception(input_space="caffe").eval()
    imagenet = BNInception(input_space="imagenet").eval()
    imagenet.load_state_dict(caffe.state_dict())
    rgb01 = torch.rand(1, 3, 64, 64)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    bgr255 = rgb01[:, [2, 1, 0]] * 255 - torch.tensor([104.0, 117.0, 128.0]).view(1, 3, 1, 1)
    with torch.no_grad():
        torch.testing.assert_close(
            imagenet((rgb01 - mean) / std), caffe(bgr255), rtol=1e-4, atol=1e-4
        )


def test_rejects_unknown_input_space():
    with pytest.raises(ConfigError, match="input_space.*'bgr'.*imagenet, rgb01, caffe"):
        build_backbone({"name": "bn_inception", "input_space": "bgr"}, 3)
