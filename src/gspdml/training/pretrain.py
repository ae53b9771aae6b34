"""Pre-training a backbone by classification of every tile class of a collage family, cached.

The GSP paper's Cifar Collage uses a ResNet20 *pre-trained on CIFAR-100 classification* (GSP
paper, supplement §2.2), whose classes include the collage's shared background classes, so the
backbone cannot suppress the background and pooling has to select the target. The analogue here
(:func:`gspdml.data.shared_collage.tile_classification_arrays`): single tiles of all ordered
pair classes of a glyph family, drawn from the collage's *training* glyph pool, classified by
``backbone -> global average pooling -> linear`` with cross-entropy. For the Cifar Collage built
from CIFAR itself (:mod:`gspdml.data.cifar_collage`), a recipe with ``data.source: cifar100``
trains on the official CIFAR-100 training file (recipe ``resnet20-cifar100``).

A *recipe* (YAML: ``backbone``, ``data``, ``train``; shipped ones in
``gspdml/presets/pretrain/``) fully determines the weights: the same recipe gives the same
weights (seeded, single process), and they are stored under
``<cache>/pretrained/<name>-<hash(recipe)>.safetensors`` (:func:`gspdml.data.cache.cache_key`,
written atomically), so a second use only reads them and an edited recipe trains anew.
A config loads them with ``model.backbone: {name: resnet20, weights: resnet20-digits}``: before
the embedder is built, :func:`resolve_recipe_weights` replaces the recipe by the file of its
weights (training it on a cache miss), and the backbone (:meth:`gspdml.models.backbones.Backbone.finish`)
reads that file; models never train.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from torch import nn

from gspdml.compat.hardware import PrecisionChoice, resolve_precision
from gspdml.config import PRESETS_DIR, parse_yaml
from gspdml.data.arrays import pixel_statistics
from gspdml.data.cache import cache_dir, cache_key
from gspdml.errors import ConfigError, DataError, read_json_object
from gspdml.file_digest import file_sha256
from gspdml.models.backbones import build_backbone
from gspdml.models.inference import autocast_context, resolve_device
from gspdml.output_files import atomic_write, check_writable_file
from gspdml.progress import Progress

RECIPES_DIR = PRESETS_DIR / "pretrain"
#: bump when the pre-training code changes what a recipe produces
CODE_VERSION = 1
TRAIN_DEFAULTS = {
    "epochs": 10,
    "batch_size": 128,
    "lr": 2.0e-3,
    "weight_decay": 5.0e-4,
    "seed": 0,
    "precision": "auto",
}
DATA_DEFAULTS = {
    "source": "digits",
    "root": None,
    "split_seed": 0,
    "tile_size": 16,
    "tiles_per_class": 64,
    "glyph_split": [0.6, 0.2, 0.2],
}
#: ``data.source: cifar100``: the official training file, with the augmentation of He et al.
#: 2016 §4.2 (``augment``); the held-out accuracy is measured on the official test file
CIFAR_DATA_DEFAULTS = {"source": "cifar100", "root": None, "augment": True}


def recipe_names() -> list[str]:
    """The shipped recipes, by the name ``weights:`` takes."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def load_recipe(source: Union[str, Path, Mapping[str, Any]]) -> dict[str, Any]:
    """A recipe from a mapping, a YAML file or a shipped recipe's name, with defaults filled in
    and ``name`` set (the file's stem)."""
    if isinstance(source, Mapping):
        raw, name = dict(source), str(source.get("name", "custom"))
    else:
        path = Path(source)
        if not path.is_file():
            path = RECIPES_DIR / f"{source}.yaml"
        if not path.is_file():
            raise ConfigError(
                "model.backbone.weights",
                f"no pre-training recipe {str(source)!r} (a YAML file, or one of: {', '.join(recipe_names())})",
            )
        try:
            raw, name = parse_yaml(path.read_text()) or {}, path.stem
        except yaml.YAMLError as error:
            raise ConfigError("pretrain", f"{path}: not valid YAML ({error})") from None
        if not isinstance(raw, dict):
            raise ConfigError("pretrain", f"{path}: expected a mapping with backbone, data, train")
    unknown = set(raw) - {"name", "description", "backbone", "data", "train"}
    if unknown or "backbone" not in raw:
        raise ConfigError(
            "pretrain",
            f"a recipe has keys backbone (required), data, train, description; got {sorted(raw)}",
        )
    recipe = {"name": raw.get("name", name), "backbone": raw["backbone"]}
    cifar = (raw.get("data") or {}).get("source") == "cifar100"
    data_defaults = CIFAR_DATA_DEFAULTS if cifar else DATA_DEFAULTS
    for section, defaults in (("data", data_defaults), ("train", TRAIN_DEFAULTS)):
        given = dict(raw.get(section) or {})
        extra = set(given) - set(defaults)
        if extra:
            raise ConfigError(
                f"pretrain.{section}",
                f"unknown keys {sorted(extra)}; allowed: {', '.join(defaults)}",
            )
        recipe[section] = {**defaults, **given}
    return recipe


#: recipe data sources read from a folder the user names (``data.root``); the others are embedded
ROOTED_SOURCES = ("cifar100",)


def recipe_on_root(name: str, root: str) -> Optional[dict[str, Any]]:
    """The recipe ``name`` with ``data.root`` set to ``root`` when its data is read from a folder
    the user names and the recipe names none (``gspdml pretrain NAME --data-root ROOT`` sets the
    same, so both find the same cached weights); None for any other recipe."""
    recipe = load_recipe(name)
    if recipe["data"]["source"] not in ROOTED_SOURCES or recipe["data"]["root"] is not None:
        return None
    recipe["data"]["root"] = str(root)
    return recipe


def recipe_key(recipe: Mapping[str, Any], device: Union[str, torch.device] = "auto") -> str:
    """Content hash of everything that determines the weights (the description and name aside),
    with the precision as this machine resolves it on ``device`` (``auto`` trains in bf16 only
    where it is native, and bf16 weights are not the fp32 ones) and the kind of device (a GPU's
    kernels round otherwise)."""
    device = resolve_device(str(device))
    return content_key(recipe, _precision(recipe, device).precision, device.type)


def content_key(recipe: Mapping[str, Any], precision: str, device_type: str) -> str:
    """:func:`recipe_key` for a given concrete precision and kind of device."""
    train = {**recipe["train"], "precision": precision, "device": device_type}
    return cache_key(
        {
            "code": CODE_VERSION,
            "backbone": recipe["backbone"],
            "data": recipe["data"],
            "train": train,
        }
    )


def _precision(recipe: Mapping[str, Any], device: torch.device) -> PrecisionChoice:
    return resolve_precision(recipe["train"]["precision"], device, field="pretrain.train.precision")


def weights_path(recipe: Mapping[str, Any], device: Union[str, torch.device] = "auto") -> Path:
    """Where the cache keeps the weights of ``recipe`` trained on ``device``."""
    name = f"{recipe['name']}-{recipe_key(recipe, device)}.safetensors"
    return cache_dir() / "pretrained" / name


#: the recipe weights shipped in the package (beside the recipes), listed with their SHA-256 in
#: :data:`SHIPPED_MANIFEST`, written by ``scripts/ship_pretrained.py`` (:mod:`gspdml.training.shipped`)
SHIPPED_DIR = RECIPES_DIR
SHIPPED_MANIFEST = "shipped.json"
#: the precisions a shipped recipe may name (``auto`` resolves by machine)
PRECISIONS_SHIPPABLE = ("fp32", "bf16")


def shipped_manifest(folder: Optional[Path] = None) -> dict[str, dict[str, Any]]:
    """``{recipe name: {file, sha256, key, precision, device, ...}}`` of the shipped weights
    (empty when none are shipped)."""
    path = (folder or SHIPPED_DIR) / SHIPPED_MANIFEST
    return read_json_object(path) if path.is_file() else {}


def shipped_weights_file(
    recipe: Mapping[str, Any], folder: Optional[Path] = None
) -> Optional[Path]:
    """The shipped weights of ``recipe`` when it is, by content, a recipe whose weights the
    package ships (its backbone, data and training as they were when the weights were made,
    precision included): checked against the manifest's SHA-256 once per process. They are used
    on any device, as a downloaded checkpoint would be; any other recipe gives ``None``."""
    folder = folder or SHIPPED_DIR
    for entry in shipped_manifest(folder).values():
        if recipe["train"]["precision"] != entry["precision"]:
            continue
        if content_key(recipe, entry["precision"], entry["device"]) != entry["key"]:
            continue
        path = folder / entry["file"]
        _check_sha256(path, entry["sha256"])
        return path
    return None


def _check_sha256(path: Path, expected: str) -> None:
    """``path``'s content has the manifest's SHA-256 (hashed once while the file is unchanged:
    :func:`gspdml.file_digest.file_sha256`, keyed by its stat, so a replaced file is checked
    again)."""
    try:
        found = file_sha256(path).removeprefix("sha256:")
    except OSError as error:
        raise DataError(
            f"{path}: the shipped pre-trained weights cannot be read ({error})"
        ) from None
    if found != expected:
        raise DataError(
            f"{path}: SHA-256 {found}, the package's {SHIPPED_MANIFEST} says {expected}; the "
            "shipped weights were changed or damaged: reinstall gspdml, or re-make them with "
            "python scripts/ship_pretrained.py"
        )


def resolve_recipe_weights(
    model: Mapping[str, Any], device: Union[str, torch.device] = "auto"
) -> dict[str, Any]:
    """The ``model`` section of a config with ``backbone.weights`` (a recipe's name or YAML file)
    replaced by the file of the recipe's weights: shipped, cached, or trained now on ``device``
    (the run's ``trainer.device``; :func:`pretrained_weights_file`); a model without recipe
    weights is returned as given."""
    backbone = model.get("backbone")
    if not isinstance(backbone, Mapping) or backbone.get("weights") is None:
        return dict(model)
    path = pretrained_weights_file(backbone["weights"], device=device)
    return {**model, "backbone": {**backbone, "weights": str(path)}}


def pretrained_state(
    source, *, verbose: bool = True, device: Union[str, torch.device] = "auto"
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The backbone weights of a recipe and their record (accuracy, seconds, key): shipped,
    loaded from the cache, or trained now and stored (also when the cached file is damaged)."""
    from safetensors.torch import load_file

    path = pretrained_weights_file(source, verbose=verbose, device=device)
    record = _cached_record(path)
    if record is None:  # replaced by a damaged file since it was checked
        raise DataError(f"{path}: damaged pre-trained weights; remove it to train them again")
    return load_file(str(path)), record


def _cached_record(path: Path) -> Optional[dict[str, Any]]:
    """The record stored with the weights ``path`` (an object with ``key``), or None
    with a warning naming the file when it cannot be read (empty, truncated, not a safetensors
    file, no record): the caller trains the recipe again and replaces it."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), "pt") as handle:
            record = json.loads((handle.metadata() or {})["record"])
        if isinstance(record, dict) and isinstance(record.get("key"), str):
            return record
        problem = "its record is not an object with a key"
    except Exception as error:  # safetensors raises its own types for a damaged file
        problem = f"{type(error).__name__}: {error}"
    warnings.warn(f"{path}: damaged ({problem}); it is trained again", RuntimeWarning, 2)
    return None


def pretrained_weights_file(
    source, *, verbose: bool = True, device: Union[str, torch.device] = "auto"
) -> Path:
    """The weights file of a recipe: the copy shipped in the package when the recipe is a shipped
    one unchanged (:func:`shipped_weights_file`, checked against its SHA-256), else the cached
    file (:func:`weights_path`), trained on ``device`` and stored atomically first when it is not
    there yet or cannot be read (a warning names it)."""
    from safetensors.torch import save_file

    recipe = load_recipe(source)
    shipped = shipped_weights_file(recipe)
    if shipped is not None:
        return shipped
    device = resolve_device(str(device))
    path = weights_path(recipe, device)
    if path.is_file() and _cached_record(path) is not None:
        return path
    if verbose:
        choice = _precision(recipe, device)
        print(
            f"pre-training {recipe['name']} (key {recipe_key(recipe, device)}, {choice.precision}: {choice.reason}) -> {path}",
            flush=True,
        )
    check_writable_file(path)  # before the training, not after it
    state, record = train_recipe(recipe, verbose=verbose, device=device)
    atomic_write(path, lambda tmp: save_file(state, tmp, metadata={"record": json.dumps(record)}))
    if verbose:
        print(
            f"pre-trained {recipe['name']}: held-out tile accuracy {100 * record['val_accuracy']:.1f}% in {record['seconds']:.0f} s",
            flush=True,
        )
    return path


#: the training examples of a recipe: ``(pool, seed) -> {"images": uint8, "labels": int}``,
#: ``pool`` ``"train"`` (fresh draws or augmentations per seed) or ``"val"`` (held out)
Examples = Callable[[str, int], dict[str, np.ndarray]]


def recipe_examples(recipe: Mapping[str, Any]) -> Examples:
    """The examples of the recipe's ``data``: glyph pair tiles
    (:func:`gspdml.data.shared_collage.tile_classification_arrays`, the training and validation
    glyph pools of the collage) or CIFAR-100 (training file, optionally augmented; test file)."""
    data = recipe["data"]
    if data["source"] == "cifar100":
        return _cifar100_examples(data)
    from gspdml.data.glyphs import source_glyphs
    from gspdml.data.shared_collage import tile_classification_arrays

    glyphs, labels = source_glyphs(data["source"], data["root"])

    def tiles(pool: str, seed: int) -> dict[str, np.ndarray]:
        return tile_classification_arrays(
            glyphs,
            labels,
            split_seed=data["split_seed"],
            tile_size=data["tile_size"],
            tiles_per_class=data["tiles_per_class"],
            glyph_split=data["glyph_split"],
            seed=seed,
            pool=pool,
        )

    return tiles


def _cifar100_examples(data: Mapping[str, Any]) -> Examples:
    from gspdml.data.cifar import load_cifar

    if data["root"] is None:
        raise ConfigError(
            "pretrain.data.root",
            "the folder holding cifar-100-python/ (gspdml pretrain RECIPE --data-root DIR, or "
            "a copy of the recipe with data.root set)",
        )
    cifar = load_cifar("cifar100", data["root"])

    def examples(pool: str, seed: int) -> dict[str, np.ndarray]:
        if pool != "train":
            return {"images": cifar.test, "labels": cifar.test_labels}
        images = cifar.train
        if data["augment"]:
            images = pad_crop_flip(images, np.random.default_rng([seed, 0xC1FA]))
        return {"images": images, "labels": cifar.train_labels}

    return examples


def pad_crop_flip(images: np.ndarray, rng: np.random.Generator, pad: int = 4) -> np.ndarray:
    """The CIFAR augmentation of He et al. 2016 §4.2: pad ``pad`` zero pixels on each side, take
    a random crop of the original size, and flip it horizontally with probability 1/2
    (``images`` uint8 ``[N, C, H, W]``)."""
    n, _, h, w = images.shape
    padded = np.pad(images, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    dy, dx = rng.integers(0, 2 * pad + 1, size=(2, n))
    flip = rng.random(n) < 0.5
    out = np.empty_like(images)
    for y in range(2 * pad + 1):
        for x in range(2 * pad + 1):
            chosen = np.flatnonzero((dy == y) & (dx == x))
            out[chosen] = padded[chosen, :, y : y + h, x : x + w]
    out[flip] = out[flip, ..., ::-1]
    return out


def _as_tensor(images: np.ndarray, mean: float, std: float) -> torch.Tensor:
    """uint8 ``[N, H, W]`` (one channel) or ``[N, C, H, W]`` as normalised float ``[N, C, H, W]``."""
    x = torch.from_numpy(np.ascontiguousarray(images)).float()
    return ((x[:, None] if x.ndim == 3 else x) / 255.0 - mean) / std


def train_recipe(
    recipe: Mapping[str, Any], *, verbose: bool = False, device: Union[str, torch.device] = "auto"
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Train ``backbone -> GAP -> linear`` with cross-entropy on the recipe's tiles (fresh glyph
    draws every epoch; Adam with a cosine learning-rate decay) on ``device`` (``auto``: the GPU
    when there is one), in
    the recipe's precision as this machine resolves it, and return the backbone's state dict and
    a record with the accuracy on tiles of the validation glyph pool; ``verbose`` prints one line
    per epoch and progress lines within (:class:`gspdml.progress.Progress`, stderr)."""
    opts = recipe["train"]
    start = time.perf_counter()
    device = resolve_device(str(device))
    precision = _precision(recipe, device).precision
    torch.manual_seed(int(opts["seed"]))
    examples = recipe_examples(recipe)
    first = examples("train", int(opts["seed"]) * 1000)
    mean, std = pixel_statistics(first["images"])
    classes = int(first["labels"].max()) + 1
    channels = 1 if first["images"].ndim == 3 else int(first["images"].shape[1])
    backbone = build_backbone(recipe["backbone"], in_channels=channels, field="pretrain.backbone")
    classifier = nn.Linear(backbone.out_channels, classes)
    model = nn.Sequential(backbone, nn.AdaptiveAvgPool2d(1), nn.Flatten(), classifier).to(device)
    layout = (
        torch.channels_last
        if precision == "bf16" and device.type == "cpu"
        else torch.contiguous_format
    )
    optimizer = torch.optim.Adam(
        model.parameters(), lr=float(opts["lr"]), weight_decay=float(opts["weight_decay"])
    )
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    epochs, batch = int(opts["epochs"]), int(opts["batch_size"])
    steps = epochs * -(-len(first["labels"]) // batch)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    rng = np.random.default_rng(np.random.SeedSequence([int(opts["seed"]), 0xBA7C]))
    meter = Progress(f"pre-training {recipe['name']}", steps, "steps", enabled=verbose)
    model.train()
    for epoch in range(epochs):
        tiles = first if epoch == 0 else examples("train", int(opts["seed"]) * 1000 + epoch)
        x, y = (
            _as_tensor(tiles["images"], mean, std).to(device),
            torch.from_numpy(tiles["labels"]).to(device),
        )
        order = torch.from_numpy(rng.permutation(len(y))).to(device)
        for i in range(0, len(order), batch):
            index = order[i : i + batch]
            with autocast_context(precision, device):
                logits = model(x[index].contiguous(memory_format=layout))
            loss = F.cross_entropy(logits.float(), y[index])
            optimizer.zero_grad(set_to_none=True)
            (scaler.scale(loss) if scaler else loss).backward()
            if scaler:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            schedule.step()
            meter.update(1, note=f"epoch {epoch + 1}/{epochs}")
        if verbose:
            print(
                f"pre-training {recipe['name']}: epoch {epoch + 1}/{epochs}, loss {loss.item():.3f}, "
                f"{time.perf_counter() - start:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    meter.close()
    val = examples("val", int(opts["seed"]) * 1000 + 999)
    accuracy = _accuracy(model, val, mean, std, precision, device)
    record = {
        "name": recipe["name"],
        "key": recipe_key(recipe, device),
        "classes": classes,
        "val_accuracy": accuracy,
        "seconds": time.perf_counter() - start,
        "threads": torch.get_num_threads(),
        "mean": mean,
        "std": std,
        "device": str(device),
        "precision": precision,
    }
    return {
        k: v.detach().cpu().clone().contiguous() for k, v in backbone.state_dict().items()
    }, record


@torch.no_grad()
def _accuracy(
    model: nn.Module,
    tiles: Mapping[str, np.ndarray],
    mean: float,
    std: float,
    precision: str,
    device: torch.device,
) -> float:
    model.eval()
    x, y = (
        _as_tensor(tiles["images"], mean, std).to(device),
        torch.from_numpy(tiles["labels"]).to(device),
    )
    with autocast_context(precision, device):
        predicted = torch.cat([model(x[i : i + 512]).argmax(1) for i in range(0, len(y), 512)])
    return float((predicted == y).float().mean())
