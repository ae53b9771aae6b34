"""Model bundles: round trip (identical embeddings), model card, hub layout from a local cache."""

import json
import shutil

import pytest
import torch

import gspdml
from gspdml.errors import ConfigError, DataError
from gspdml.retrieval.bundle import FILES, write_bundle
from gspdml.retrieval.encoder import load_model_and_transform
from gspdml.retrieval.sources import ImageFiles
from gspdml.models.inference import embed
from gspdml.cli import main
from tests.helpers.retrieval import write_image_folder, write_run


@pytest.fixture
def run(tmp_path):
    images = write_image_folder(tmp_path / "images", per_class=2)
    write_run(tmp_path / "run", pooling="gsp", seed=3)
    # results.json as the trainer writes it: the test-split metrics under "test"
    (tmp_path / "run" / "results.json").write_text(json.dumps({"name": "run", "test": {"map_at_r": 0.31, "precision_at_1": 0.62}}))
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
    for fact in ("pooling `gsp`", "loss `c2`", "**Backbone**: `small_cnn`", f"gspdml {gspdml.__version__}",
                 "| map_at_r | 0.3100 |", "| precision_at_1 | 0.6200 |", "**Data hash**: `unavailable"):
        assert fact in card
    info = json.loads((tmp_path / "bundle" / "bundle.json").read_text())
    assert info["weights"].startswith("sha256:") and info["evaluation_set"] == "test"


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
    encoder = gspdml.from_pretrained("someone/gsp-demo", cache_dir=str(tmp_path / "cache"), local_files_only=True)
    assert torch.equal(encoder(paths), run_embeddings(run_dir, paths))
    with pytest.raises(DataError, match="someone/absent: cannot load the hub repository"):
        gspdml.from_pretrained("someone/absent", cache_dir=str(tmp_path / "cache"), local_files_only=True)
