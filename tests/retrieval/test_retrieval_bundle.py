"""Model bundles: round trip (identical embeddings), decoding as the run, model card, hub layout
from a local cache."""

import json
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

import gspdml
from gspdml.cli import main
from gspdml.errors import ConfigError, DataError
from gspdml.models.inference import embed
from gspdml.retrieval.bundle import FILES, write_bundle
from gspdml.retrieval.encoder import Encoder, load_model_and_transform
from gspdml.retrieval.sources import ImageFiles
from tests.helpers.retrieval import write_image_folder, write_run


@pytest.fixture
def run(tmp_path):
    images = write_image_folder(tmp_path / "images", per_class=2)
    write_run(tmp_path / "run", pooling="gsp", seed=3)
    # results.json as the trainer writes it: the test-split metrics under "test"
    (tmp_path / "run" / "results.json").write_text(
        json.dumps({"name": "run", "test": {"map_at_r": 0.31, "precision_at_1": 0.62}})
    )
    return tmp_path / "run", [str(p) for p in images]


def run_embeddings(run_dir, paths):
    _, model, transform = load_model_and_transform(run_dir, torch.device("cpu"))
    return embed(model, ImageFiles(paths, [None] * len(paths), transform), 4)[0]


def test_bundle_round_trip_gives_identical_embeddings(run, tmp_path, capsys):
    run_dir, paths = run
    assert main(["bundle", str(run_dir), "--out", str(tmp_path / "bundle")]) == 0
    assert sorted(p.name for p in (tmp_path / "bundle").iterdir()) == sorted(FILES)
    encoder = gspdml.from_pretrained(tmp_path / "bundle")
    assert torch.equal(encoder(paths, batch_size=4), run_embeddings(run_dir, paths))

    card = (tmp_path / "bundle" / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: gspdml\n")
    for fact in (
        "pooling `gsp`",
        "loss `c2`",
        "**Backbone**: `small_cnn`",
        f"gspdml {gspdml.__version__}",
        "| map_at_r | 0.3100 |",
        "| precision_at_1 | 0.6200 |",
        "**Data hash**: `unavailable",
    ):
        assert fact in card
    info = json.loads((tmp_path / "bundle" / "bundle.json").read_text())
    assert info["weights"].startswith("sha256:") and info["evaluation_set"] == "test"


def awkward_images(folder):
    """Files the library's loader decodes differently from a bare ``Image.open``: a JPEG stored
    sideways with an EXIF rotation tag, a 16-bit grey PNG, a PNG with transparent black pixels."""
    folder.mkdir()
    rows, cols = np.mgrid[0:24, 0:48]
    pixels = np.stack([rows * 10, cols * 5, np.where(cols < 16, 230, 20)], axis=-1).astype(np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees clockwise to display
    Image.fromarray(pixels).save(folder / "sideways.jpg", exif=exif, quality=95)
    Image.fromarray((rows * 2700 + cols * 40).astype(np.uint16)).save(folder / "deep.png")
    alpha = np.where(cols < 24, 0, 255).astype(np.uint8)[..., None]
    rgba = np.concatenate([pixels // 4, alpha], axis=-1)
    Image.fromarray(rgba, "RGBA").save(folder / "transparent.png")
    return [str(folder / name) for name in ("sideways.jpg", "deep.png", "transparent.png")]


def test_bundle_decodes_images_as_the_run(run, tmp_path):
    """Fails on the old code: BundledEncoder opened files with Image.open (no EXIF rotation, 16-bit
    values clipped, transparent pixels black), so these images embedded differently from the run
    (cosine 0.997, 0.88, 0.91 here); Encoder converted PIL images the same bare way."""
    run_dir, _ = run
    write_bundle(run_dir, tmp_path / "bundle")
    paths = awkward_images(tmp_path / "awkward")
    bundle = gspdml.from_pretrained(tmp_path / "bundle")
    encoder = Encoder.from_run(run_dir, device="cpu")
    bundled, expected = bundle(paths), encoder(paths)
    cosine = torch.nn.functional.cosine_similarity(bundled, expected)
    assert (cosine > 0.9999).all(), cosine
    opened = []
    for path in paths:
        with Image.open(path) as image:
            image.load()
            opened.append(image.copy())
    # PIL images: the same rules as files
    torch.testing.assert_close(bundle(opened), bundled, rtol=0, atol=1e-6)
    torch.testing.assert_close(encoder(opened), expected, rtol=0, atol=1e-6)
    decoding = json.loads((tmp_path / "bundle" / "preprocessing.json").read_text())["decoding"]
    assert decoding["loader"] == "gspdml.data.images.load_image" and "exif_orientation" in decoding


def test_bundle_refuses_overwrite_and_tampered_weights(run, tmp_path):
    run_dir, paths = run
    write_bundle(run_dir, tmp_path / "bundle")
    with pytest.raises(ConfigError, match="already exists; pass --overwrite"):
        write_bundle(run_dir, tmp_path / "bundle")
    weights = tmp_path / "bundle" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(DataError, match="model.safetensors: sha256 .* differs from the bundle's"):
        gspdml.from_pretrained(tmp_path / "bundle")
    (tmp_path / "bundle" / "bundle.json").unlink()
    with pytest.raises(DataError, match="not a gspdml bundle \\(missing bundle.json\\)"):
        gspdml.from_pretrained(tmp_path / "bundle")


def test_hub_repository_layout_loads_from_a_local_cache_without_network(run, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run_dir, paths = run
    write_bundle(run_dir, tmp_path / "bundle")
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "cache" / "models--someone--gsp-demo"
    shutil.copytree(tmp_path / "bundle", repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    encoder = gspdml.from_pretrained(
        "someone/gsp-demo", cache_dir=str(tmp_path / "cache"), local_files_only=True
    )
    assert torch.equal(encoder(paths), run_embeddings(run_dir, paths))
    with pytest.raises(DataError, match="someone/absent: cannot load the hub repository"):
        gspdml.from_pretrained(
            "someone/absent", cache_dir=str(tmp_path / "cache"), local_files_only=True
        )


def test_model_card_states_the_baselines(run, tmp_path):
    run_dir, _ = run
    (run_dir / "results.json").write_text(
        json.dumps(
            {
                "test": {"map_at_r": 0.31, "precision_at_1": 0.62},
                "baseline": {
                    "step0": {"map_at_r": 0.12, "precision_at_1": 0.4},
                    "backbone_gap": {"map_at_r": 0.45, "precision_at_1": 0.7},
                },
            }
        )
    )
    write_bundle(run_dir, tmp_path / "bundle")
    card = (tmp_path / "bundle" / "README.md").read_text()
    assert "## Baselines (same test split and protocol)" in card
    assert "| metric | trained | step0 | backbone_gap |" in card
    assert "| map_at_r | 0.3100 | 0.1200 | 0.4500 |" in card
    assert "| precision_at_1 | 0.6200 | 0.4000 | 0.7000 |" in card
