"""Native ResNets: torchvision's checkpoints must load and give torchvision's layer4 output."""

import torch

from gspdml.compat.torchvision_shim import import_torchvision
from gspdml.models.backbones import build_backbone
from gspdml.models.backbones.resnet import ResNet18, ResNet34, ResNet50, ResNet101

torchvision = import_torchvision()


def torchvision_layer4(model, x):
    x = model.maxpool(model.relu(model.bn1(model.conv1(x))))
    return model.layer4(model.layer3(model.layer2(model.layer1(x))))


def randomised_torchvision(name):
    torch.manual_seed(0)
    reference = getattr(torchvision.models, name)().eval()
    with torch.no_grad():
        for module in reference.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.normal_(0, 0.1)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
    return reference


def test_loads_torchvision_checkpoint_from_torch_hub_cache_and_matches_its_forward(
    tmp_path, monkeypatch
):
    reference = randomised_torchvision("resnet18")
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    torch.save(reference.state_dict(), tmp_path / "hub" / "checkpoints" / "resnet18-f37072fd.pth")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    model = build_backbone({"name": "resnet18", "pretrained": True}, 3).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        out = model(x)
        torch.testing.assert_close(out, torchvision_layer4(reference, x), rtol=1e-5, atol=1e-5)
    assert out.shape == (1, 512, 2, 2) and model.out_channels == 512


def test_resnet50_bottlenecks_match_torchvision():
    reference = randomised_torchvision("resnet50")
    model = ResNet50().eval()
    model.load_state_dict(
        {k: v for k, v in reference.state_dict().items() if not k.startswith("fc.")}
    )
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        out = model(x)
        torch.testing.assert_close(out, torchvision_layer4(reference, x), rtol=1e-5, atol=1e-5)
    assert out.shape == (1, 2048, 2, 2) and model.out_channels == 2048


def test_checkpoint_names_are_torchvisions():
    for cls, weights in [
        (ResNet18, "ResNet18"),
        (ResNet34, "ResNet34"),
        (ResNet50, "ResNet50"),
        (ResNet101, "ResNet101"),
    ]:
        urls = [w.url.rsplit("/", 1)[-1] for w in getattr(torchvision.models, f"{weights}_Weights")]
        assert list(cls.weight_files) == urls


def test_resnet50_map_is_8x8_at_227_pixels_and_state_dict_keys_match_torchvision():
    with torch.device("meta"):
        model = ResNet50()
        assert model(torch.empty(1, 3, 227, 227)).shape == (1, 2048, 8, 8)
        reference_keys = set(torchvision.models.resnet50().state_dict())
    assert set(model.state_dict()) == {k for k in reference_keys if not k.startswith("fc.")}
