"""Shared helpers of the retrieval tests: a tiny labelled image folder, a run directory as the
trainer writes it (a real, untrained, seeded embedder saved with safetensors, and the resolved
config with its recorded evaluation transform), and a run the real trainer trains in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from gspdml.cli import build_parser
from gspdml.config import dump_config, load_config
from gspdml.data.recipes import NORMALIZATIONS
from gspdml.models import build_embedder
from gspdml.retrieval.generations import MANIFEST_FILE, read_manifest
from gspdml.training import train
from gspdml.training.run_dir import save_weights
from tests.helpers.images import folder_config, image_folder

COLOURS = {"red": (200, 40, 40), "green": (40, 180, 60), "blue": (50, 60, 210)}
MEAN, STD = list(NORMALIZATIONS["imagenet"]["mean"]), list(NORMALIZATIONS["imagenet"]["std"])
#: the dataset options of :func:`write_run`'s runs: an image folder, resized and centre-cropped to
#: 32 px, ImageNet normalisation
FOLDER_OPTIONS = {"transform": "center", "resize": 32, "crop": 32, "normalization": "imagenet"}
#: what the trainer records as data.eval_transform for :data:`FOLDER_OPTIONS` (pinned by
#: tests/retrieval/test_retrieval_run_transform.py on a trained run)
EVAL_TRANSFORM = {
    "channels": 3,
    "resize": [32],
    "center_crop": [32, 32],
    "mean": MEAN,
    "std": STD,
    "bgr": False,
    "value_range": 1.0,
}


def write_image_folder(
    root: Path, classes=("red", "green", "blue"), per_class: int = 3, size=(40, 36), seed: int = 0
):
    """PNG files ``root/<class>/<i>.png``: a class colour with a bright square at a random place."""
    rng = np.random.default_rng(seed)
    paths = []
    for name in classes:
        (root / name).mkdir(parents=True, exist_ok=True)
        colour = np.array(COLOURS.get(name, (120, 120, 120)), dtype=np.float64)
        for i in range(per_class):
            pixels = colour + rng.normal(0, 25, size=(size[0], size[1], 3))
            top, left = rng.integers(0, size[0] - 12), rng.integers(0, size[1] - 12)
            pixels[top : top + 12, left : left + 12] = 250
            path = root / name / f"{i}.png"
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path)
            paths.append(path)
    return paths


def write_run(
    run_dir: Path,
    pooling="gap",
    seed: int = 0,
    eval_transform=EVAL_TRANSFORM,
    channels: int = 3,
    dataset=None,
    initialise: bool = True,
    trainer=None,
) -> dict:
    """A run directory as the trainer writes it: config.yaml (the resolved config, which
    ``load_config`` accepts: asserted), model.safetensors, metrics.jsonl, results.json.

    ``dataset``: the run's ``data.dataset`` (default: an image folder with :data:`FOLDER_OPTIONS`
    at ``<run_dir>-images``, which need not exist: with the evaluation transform recorded, nothing
    reads it). ``eval_transform``: the recorded ``data.eval_transform`` (default: what the trainer
    records for that folder; None: a run written before the trainer recorded it).
    ``initialise``: give a k-center GSP seeded random prototypes, as training does before saving.
    ``trainer``: the run's ``trainer`` section (default: the defaults)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if dataset is None:
        dataset = {"name": "image_folder", "root": f"{run_dir}-images", **FOLDER_OPTIONS}
    config = load_config(
        {
            "name": run_dir.name,
            "seed": seed,
            "data": {"dataset": dataset, "eval_transform": eval_transform},
            "model": {
                "backbone": {"name": "small_cnn"},
                "embedding_dim": 32,
                "pooling": pooling,
                "normalize": True,
            },
            "loss": {"name": "c2", "pos_margin": 0.0, "neg_margin": 0.3841},
            "trainer": trainer or {},
        }
    )
    torch.manual_seed(seed)
    model = build_embedder(config["model"], in_channels=channels)
    for module in model.modules():
        if initialise and getattr(module, "is_initialised", True) is False:
            module.initialize_prototypes(torch.randn(module.num_prototypes, module.in_channels))
    save_weights(run_dir / "model.safetensors", model, channels, config)
    (run_dir / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    assert load_config(run_dir / "config.yaml") == config  # as `gspdml train` reads it back
    with open(run_dir / "metrics.jsonl", "w", encoding="utf-8") as handle:
        for step in range(0, 101, 10):
            handle.write(
                json.dumps({"step": step, "split": "train", "loss": 1.0 / (1 + step / 20)}) + "\n"
            )
            if step % 50 == 0:
                handle.write(
                    json.dumps(
                        {
                            "step": step,
                            "split": "val",
                            "map_at_r": 0.1 + step / 400,
                            "precision_at_1": 0.3 + step / 300,
                        }
                    )
                    + "\n"
                )
    (run_dir / "results.json").write_text(
        json.dumps(
            {"map_at_r": 0.31, "precision_at_1": 0.62, "recall_at_k": {"1": 0.62, "2": 0.75}}
        )
    )
    return config


def train_run(root: Path, run_dir: Path, **dataset) -> Path:
    """Train a run with the real trainer (two steps, a small CNN) on a new image folder at ``root``
    (``train/{a,b}``, ``test/{c,d}``, 20 px PNGs); ``dataset``: image-folder options."""
    image_folder(root, train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    train(load_config(folder_config(root, run_dir.parent, **dataset)), run_dir)
    return run_dir


def register_for_test(monkeypatch, registry, name: str, factory) -> None:
    """Register ``factory`` under ``name`` for one test only (removed again at teardown), so that
    test-only components never reach registry-wide tests of other areas."""
    monkeypatch.setitem(registry._entries, name, factory)


def run_cli(*argv: str) -> int:
    """Parse ``argv`` with the ``gspdml`` parser and run the chosen sub-command (without
    ``gspdml.cli.main``'s error handling): errors propagate to the test."""
    args = build_parser().parse_args([str(a) for a in argv])
    return args.func(args)


def index_file(folder: Path, name: str) -> Path:
    """The file ``name`` of an index folder's current generation (the manifest names it)."""
    manifest = read_manifest(Path(folder))
    assert manifest is not None, f"{folder} has no manifest"
    return Path(folder) / manifest["folder"] / name


def without_manifest(folder: Path) -> Path:
    """Turn an index folder into the layout written before manifests (the files at the top
    level), so that the checks of that read path are reached; returns ``folder``."""
    generation = index_file(folder, "")
    for path in generation.iterdir():
        path.rename(Path(folder) / path.name)
    generation.rmdir()
    (Path(folder) / MANIFEST_FILE).unlink()
    return Path(folder)
