"""The vision–language model interface, weight loading from files saved here, and the offline
error for weights that are not local."""

import time

import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from gspdml.cir.backends import cached_hub_file, clip_preprocess, load_model
from gspdml.cir.vl_model import (
    OptionalDependencyError,
    VisionLanguageEncoder,
    WeightsUnavailableError,
    load_weights,
    require,
)
from gspdml.errors import ConfigError, DataError
from tests.helpers.cir_tiny_clip import TinyCLIP, wrap

TEXTS = ["shark cartoon", "a dog", "origami"]


def pixels(n=3):
    return torch.randn(n, 3, 16, 16, generator=torch.Generator().manual_seed(5))


def test_wrapper_normalises_and_follows_the_protocol():
    model = wrap(TinyCLIP())
    assert isinstance(model, VisionLanguageEncoder)
    image, text = model.encode_image(pixels()), model.encode_text(TEXTS)
    assert image.shape == (3, 16) and text.shape == (3, 16) and image.dtype == torch.float32
    torch.testing.assert_close(image.norm(dim=1), torch.ones(3))
    torch.testing.assert_close(text.norm(dim=1), torch.ones(3))
    raw = TinyCLIP().encode_image(pixels()).detach()
    torch.testing.assert_close(image, raw / raw.norm(dim=1, keepdim=True))
    with pytest.raises(DataError, match="list of strings"):
        model.encode_text("a dog")
    with pytest.raises(DataError, match=r"\[N, C, H, W\]"):
        model.encode_image(torch.zeros(3, 16, 16))


def test_clip_preprocess_resizes_crops_and_normalises():
    image = Image.new("RGB", (40, 20), (255, 0, 128))
    x = clip_preprocess(16)(image)
    assert x.shape == (3, 16, 16)
    want = (
        torch.tensor([1.0, 0.0, 128 / 255]) - torch.tensor([0.48145466, 0.4578275, 0.40821073])
    ) / torch.tensor([0.26862954, 0.26130258, 0.27577711])
    torch.testing.assert_close(x[:, 8, 8], want, atol=1e-2, rtol=0)


def test_weights_round_trip_safetensors_and_wrapped_torch_file(tmp_path):
    source = TinyCLIP(seed=1)
    want_image, want_text = wrap(source).encode_image(pixels()), wrap(source).encode_text(TEXTS)
    save_file(
        {k: v.contiguous() for k, v in source.state_dict().items()}, str(tmp_path / "w.safetensors")
    )
    # a DataParallel checkpoint nested under "state_dict", as RemoteCLIP's are
    torch.save(
        {"state_dict": {f"module.{k}": v for k, v in source.state_dict().items()}, "epoch": 3},
        tmp_path / "w.pt",
    )
    for name in ("w.safetensors", "w.pt"):
        target = TinyCLIP(seed=2)
        assert not torch.allclose(wrap(target).encode_image(pixels()), want_image)
        load_weights(target, tmp_path / name)
        torch.testing.assert_close(wrap(target).encode_image(pixels()), want_image)
        torch.testing.assert_close(wrap(target).encode_text(TEXTS), want_text)
    via_spec = load_model(
        "python:tests.helpers.cir_tiny_clip:build", weights=str(tmp_path / "w.pt")
    )
    torch.testing.assert_close(via_spec.encode_text(TEXTS), want_text)


def test_weight_files_that_do_not_fit_name_file_and_keys(tmp_path):
    torch.save(TinyCLIP(dim=8).state_dict(), tmp_path / "small.pt")
    with pytest.raises(
        DataError,
        match=r"small\.pt: weights do not fit TinyCLIP; wrong shape: text_projection\.bias",
    ):
        load_weights(TinyCLIP(dim=16), tmp_path / "small.pt")
    torch.save({"visual.0.weight": torch.zeros(1)}, tmp_path / "partial.pt")
    with pytest.raises(DataError, match=r"missing: text_projection\.bias, text_projection\.weight"):
        load_weights(TinyCLIP(), tmp_path / "partial.pt")
    torch.save(
        {"x": object()}, tmp_path / "pickled.pt"
    )  # arbitrary objects are refused, never unpickled
    with pytest.raises(DataError, match="cannot read weights"):
        load_weights(TinyCLIP(), tmp_path / "pickled.pt")
    with pytest.raises(DataError, match="weights file not found"):
        load_weights(TinyCLIP(), tmp_path / "none.pt")


def test_missing_weights_fail_at_once_and_say_what_to_provide(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HOME", str(tmp_path))
    start = time.perf_counter()
    with pytest.raises(WeightsUnavailableError) as error:
        load_model("clip")
    message = str(error.value)
    assert (
        "open_clip ViT-L-14@openai" in message
        and "timm/vit_large_patch14_clip_224.openai" in message
    )
    assert "--weights PATH" in message and str(tmp_path / "hub") in message
    with pytest.raises(WeightsUnavailableError, match="chendelong/RemoteCLIP"):
        load_model("remoteclip")
    with pytest.raises(
        WeightsUnavailableError, match=r"hf:openai/clip-vit-large-patch14.*hf:/path/to/dir"
    ):
        load_model("hf:openai/clip-vit-large-patch14")
    with pytest.raises(WeightsUnavailableError, match="missing.pt"):
        load_model("open_clip:ViT-L-14", weights=str(tmp_path / "missing.pt"))
    assert time.perf_counter() - start < 2.0  # no download attempts or retries


def test_cache_lookup_and_spec_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snapshot = tmp_path / "models--timm--vit_large_patch14_clip_224.openai" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "open_clip_pytorch_model.bin").write_bytes(b"")
    assert (
        cached_hub_file(
            "timm/vit_large_patch14_clip_224.openai",
            ("open_clip_model.safetensors", "open_clip_pytorch_model.bin"),
        )
        == snapshot / "open_clip_pytorch_model.bin"
    )
    assert cached_hub_file("chendelong/RemoteCLIP", ("RemoteCLIP-ViT-L-14.pt",)) is None
    with pytest.raises(ConfigError, match="model: unknown model spec 'vit'"):
        load_model("vit")
    with pytest.raises(ConfigError, match="cannot import factory"):
        load_model("python:tests.helpers.cir_tiny_clip:nope")
    with pytest.raises(OptionalDependencyError, match=r"pip install 'gspdml\[clip\]'"):
        require("gspdml_no_such_module", "clip", "open_clip_torch")
