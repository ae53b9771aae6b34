"""Pre-training a backbone by classification of every tile class of a collage family, cached.

The GSP paper's Cifar Collage uses a ResNet20 *pre-trained on CIFAR-100 classification* (GSP
paper, supplement §2.2), whose classes include the collage's background classes, so pooling has
to select the target. The analogue here: single tiles of all ordered pair classes of a glyph
family from the collage's *training* glyph pool
(:func:`gspdml.data.shared_collage.tile_classification_arrays`), classified by ``backbone -> GAP
-> linear`` with cross-entropy; ``data.source: cifar100`` trains on the official CIFAR-100 file.

A *recipe* (YAML: ``backbone``, ``data``, ``train``; shipped ones in ``gspdml/presets/pretrain/``)
fully determines the weights, cached under ``<cache>/pretrained/<name>-<hash(recipe)>.safetensors``.
A config names one as ``model.backbone: {name: resnet20, weights: resnet20-digits}``;
:func:`resolve_recipe_weights` replaces it by the weights file before the embedder is built.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from torch import nn

from gspdml.compat.hardware import PRECISIONS, PrecisionChoice, resolve_precision
from gspdml.config import PRESETS_DIR, parse_yaml
from gspdml.data.arrays import pixel_statistics
from gspdml.data.cache import cache_dir, cache_key
from gspdml.data.glyphs import SOURCES
from gspdml.errors import ConfigError, DataError, read_json_object
from gspdml.file_digest import file_sha256
from gspdml.models.backbones import build_backbone
from gspdml.models.embedder import model_section
from gspdml.models.inference import autocast_context, memory_format, resolve_device
from gspdml.output_files import atomic_write, check_writable_file
from gspdml.progress import Progress
from gspdml.settings.schema import REQUIRED, Section, option, tagged
from gspdml.settings.sections import ModelConfig

RECIPES_DIR = PRESETS_DIR / "pretrain"
#: bump when the pre-training code changes what a recipe produces
CODE_VERSION = 1
#: where a recipe's errors point
FIELD = "pretrain"


@dataclasses.dataclass(frozen=True)
class RecipeTraining(Section):
    """A recipe's ``train`` section: Adam with a cosine learning-rate decay."""

    epochs: int = option(10, "passes over the training examples", minimum=1)
    batch_size: int = option(128, "examples per step", minimum=1)
    lr: float = option(2.0e-3, "Adam's learning rate, decayed to 0 by a cosine", minimum=0)
    weight_decay: float = option(5.0e-4, "Adam's weight decay", minimum=0)
    seed: int = option(0, "the seed of the initial weights, the examples and the batch order")
    precision: Literal[PRECISIONS] = option(  # type: ignore[valid-type]
        "auto", "auto: bf16 where the hardware has it, else fp32", noun="precision"
    )


@dataclasses.dataclass(frozen=True)
class TileData(Section):
    """A recipe's ``data``: single tiles of every ordered pair class of a glyph family
    (:func:`gspdml.data.shared_collage.tile_classification_arrays`)."""

    source: Literal[SOURCES] = option("digits", "the glyph family", noun="source")  # type: ignore[valid-type]
    root: Optional[str] = option(None, "the folder of a glyph family read from disk")
    split_seed: int = option(0, "the seed of the collage's glyph split")
    tile_size: int = option(16, "tile side in pixels", minimum=1)
    tiles_per_class: int = option(64, "tiles drawn per pair class and epoch", minimum=1)
    glyph_split: tuple[float, ...] = option(
        (0.6, 0.2, 0.2), "the train, val and test fractions of the glyphs", minimum=0
    )


@dataclasses.dataclass(frozen=True)
class CifarData(Section):
    """A recipe's ``data`` with ``source: cifar100``: the official training file (augmented as
    in He et al. 2016 §4.2); accuracy on the official test file."""

    source: Literal["cifar100"] = option(REQUIRED, "the CIFAR-100 files", noun="source")
    root: Optional[str] = option(None, "the folder holding cifar-100-python/")
    augment: bool = option(True, "pad, crop and flip the training images (He et al. 2016 §4.2)")


#: recipe data sources read from a folder the user names (``data.root``); the others are embedded
ROOTED_SOURCES = ("cifar100",)


@dataclasses.dataclass(frozen=True)
class RecipeFile(Section):
    """A recipe as written: the data is read by its source (:func:`load_recipe`)."""

    backbone: Any = option(REQUIRED, "the backbone spec (gspdml list backbones)")
    data: dict[str, Any] = option({}, "the training examples (source and its options)")
    train: RecipeTraining = option(RecipeTraining, "the optimisation")
    name: Optional[str] = option(None, "the recipe's name (default: the file's stem)")
    description: str = option("", "what the recipe makes, in words")


@dataclasses.dataclass(frozen=True)
class Recipe(Section):
    """A pre-training recipe, parsed once (:func:`load_recipe`)."""

    name: str = option(REQUIRED, "the name weights: takes")
    backbone: Any = option(REQUIRED, "the backbone spec")
    data: Union[TileData, CifarData] = option(REQUIRED, "the training examples")
    train: RecipeTraining = option(RecipeTraining, "the optimisation")

    def on_root(self, root: str) -> Recipe:
        """This recipe with ``data.root`` = ``root``."""
        return dataclasses.replace(self, data=dataclasses.replace(self.data, root=str(root)))

    def file_content(self) -> dict[str, Any]:
        """The YAML mapping of this recipe (its name is the file's stem)."""
        return {
            "backbone": self.backbone,
            "data": self.data.to_dict(),
            "train": self.train.to_dict(),
        }


def recipe_names() -> list[str]:
    """The shipped recipes, by the name ``weights:`` takes."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def load_recipe(source: Union[str, Path, Mapping[str, Any], Recipe]) -> Recipe:
    """A recipe from a mapping, a YAML file or a shipped recipe's name, checked, named by the
    file's stem (``custom`` for a mapping)."""
    if isinstance(source, Recipe):
        return source
    if isinstance(source, Mapping):
        raw, stem = source, "custom"
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
            raw, stem = parse_yaml(path.read_text()) or {}, path.stem
        except yaml.YAMLError as error:
            raise ConfigError(FIELD, f"{path}: not valid YAML ({error})") from None
        if not isinstance(raw, dict):
            raise ConfigError(FIELD, f"{path}: expected a mapping with backbone, data, train")
    written = RecipeFile.from_mapping(raw, FIELD)
    return Recipe(
        name=written.name or stem,
        backbone=written.backbone,
        data=_recipe_data(written.data),
        train=written.train,
    )


def _recipe_data(data: Mapping[str, Any]) -> Union[TileData, CifarData]:
    """The ``data`` section of the kind its ``source`` names."""
    cifar: dict[str, type[TileData | CifarData]] = dict.fromkeys(ROOTED_SOURCES, CifarData)
    return tagged(data, "source", cifar, TileData, f"{FIELD}.data")


def recipe_on_root(name: str, root: str) -> Optional[Recipe]:
    """The recipe ``name`` with ``data.root`` = ``root`` when its data is read from a folder the
    user names and it names none; None for any other recipe."""
    recipe = load_recipe(name)
    if recipe.data.source not in ROOTED_SOURCES or recipe.data.root is not None:
        return None
    return recipe.on_root(root)


def recipe_precision(recipe: Recipe, device: torch.device) -> PrecisionChoice:
    """The recipe's precision on ``device``."""
    return resolve_precision(recipe.train.precision, device, field=f"{FIELD}.train.precision")


def recipe_key(recipe: Recipe, device: Union[str, torch.device] = "auto") -> str:
    """Content hash of everything that determines the weights, with the precision as resolved on
    ``device`` and the kind of device (both change the weights)."""
    device = resolve_device(str(device))
    return content_key(recipe, recipe_precision(recipe, device).precision, device.type)


def content_key(recipe: Recipe, precision: str, device_type: str) -> str:
    """:func:`recipe_key` for a given concrete precision and kind of device."""
    train = {**recipe.train.to_dict(), "precision": precision, "device": device_type}
    return cache_key(
        {
            "code": CODE_VERSION,
            "backbone": recipe.backbone,
            "data": recipe.data.to_dict(),
            "train": train,
        }
    )


def weights_path(recipe: Recipe, device: Union[str, torch.device] = "auto") -> Path:
    """Where the cache keeps the weights of ``recipe`` trained on ``device``."""
    return _cached_file(recipe, recipe_key(recipe, device))


def _cached_file(recipe: Recipe, key: str) -> Path:
    return cache_dir() / "pretrained" / f"{recipe.name}-{key}.safetensors"


#: recipe weights shipped beside the recipes, listed with their SHA-256 in :data:`SHIPPED_MANIFEST`
SHIPPED_DIR = RECIPES_DIR
SHIPPED_MANIFEST = "shipped.json"
#: the precisions a shipped recipe may name (``auto`` resolves by machine)
PRECISIONS_SHIPPABLE = ("fp32", "bf16")


def shipped_manifest(folder: Optional[Path] = None) -> dict[str, dict[str, Any]]:
    """``{recipe name: {file, sha256, key, precision, device, ...}}`` of the shipped weights."""
    path = (folder or SHIPPED_DIR) / SHIPPED_MANIFEST
    return read_json_object(path) if path.is_file() else {}


def shipped_weights_file(recipe: Recipe, folder: Optional[Path] = None) -> Optional[Path]:
    """The shipped weights of ``recipe`` when the package ships weights of that recipe by content
    (precision included; used on any device), checked against their SHA-256; else ``None``."""
    folder = folder or SHIPPED_DIR
    for entry in shipped_manifest(folder).values():
        if recipe.train.precision != entry["precision"]:
            continue
        if content_key(recipe, entry["precision"], entry["device"]) != entry["key"]:
            continue
        path: Path = folder / entry["file"]
        _check_sha256(path, entry["sha256"])
        return path
    return None


def _check_sha256(path: Path, expected: str) -> None:
    """``path``'s content has the manifest's SHA-256."""
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
    model: ModelConfig | Mapping[str, Any], device: Union[str, torch.device] = "auto"
) -> ModelConfig:
    """The typed ``model`` section with ``backbone.weights`` (a recipe's name or YAML file)
    replaced by the file of the recipe's weights: shipped, cached, or trained now on ``device``
    (the run's ``trainer.device``; :func:`pretrained_weights_file`); a model without recipe
    weights is returned as given."""
    section = model_section(model)
    if section.backbone_recipe is None:
        return section
    path = pretrained_weights_file(section.backbone_recipe, device=device)
    return dataclasses.replace(section, backbone={**section.backbone, "weights": str(path)})


#: what names a recipe: a shipped recipe's name, a YAML file, a mapping, or a loaded recipe
RecipeSource = Union[str, Path, Mapping[str, Any], Recipe]


def pretrained_state(
    source: RecipeSource, *, verbose: bool = True, device: Union[str, torch.device] = "auto"
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The backbone weights of a recipe and their record (:func:`pretrained_weights_file`)."""
    from safetensors.torch import load_file

    path = pretrained_weights_file(source, verbose=verbose, device=device)
    record = _cached_record(path)
    if record is None:  # replaced by a damaged file since it was checked
        raise DataError(f"{path}: damaged pre-trained weights; remove it to train them again")
    return load_file(str(path)), record


def _cached_record(path: Path) -> Optional[dict[str, Any]]:
    """The record stored with the weights ``path`` (an object with ``key``), or None with a
    warning when the file is damaged (the caller trains again)."""
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
    source: RecipeSource, *, verbose: bool = True, device: Union[str, torch.device] = "auto"
) -> Path:
    """The weights file of a recipe: the shipped copy (:func:`shipped_weights_file`), else the
    cached file, trained on ``device`` and stored first when missing or damaged."""
    from safetensors.torch import save_file

    recipe = load_recipe(source)
    shipped = shipped_weights_file(recipe)
    if shipped is not None:
        return shipped
    device = resolve_device(str(device))
    choice = recipe_precision(recipe, device)
    key = content_key(recipe, choice.precision, device.type)
    path = _cached_file(recipe, key)
    if path.is_file() and _cached_record(path) is not None:
        return path
    if verbose:
        print(
            f"pre-training {recipe.name} (key {key}, {choice.precision}: {choice.reason}) -> {path}",
            flush=True,
        )
    check_writable_file(path)  # before the training, not after it
    state, record = train_recipe(recipe, verbose=verbose, device=device, precision=choice)
    atomic_write(path, lambda tmp: save_file(state, tmp, metadata={"record": json.dumps(record)}))
    if verbose:
        print(
            f"pre-trained {recipe.name}: held-out tile accuracy {100 * record['val_accuracy']:.1f}% in {record['seconds']:.0f} s",
            flush=True,
        )
    return path


class Labelled(NamedTuple):
    """Training examples: uint8 images ``[N, H, W]`` (one channel) or ``[N, C, H, W]`` and int
    labels ``[N]``."""

    images: np.ndarray
    labels: np.ndarray


#: the training examples of a recipe: ``(pool, seed) -> Labelled``, ``pool`` ``"train"`` (fresh
#: draws or augmentations per seed) or ``"val"`` (held out)
Examples = Callable[[str, int], Labelled]


def recipe_examples(recipe: Recipe) -> Examples:
    """The examples of the recipe's ``data``: glyph pair tiles or CIFAR-100."""
    data = recipe.data
    if isinstance(data, CifarData):
        return _cifar100_examples(data)
    from gspdml.data.glyphs import source_glyphs
    from gspdml.data.shared_collage import tile_classification_arrays

    glyphs, labels = source_glyphs(data.source, data.root)
    drawn = ("split_seed", "tile_size", "tiles_per_class", "glyph_split")
    options = {name: getattr(data, name) for name in drawn}

    def tiles(pool: str, seed: int) -> Labelled:
        arrays = tile_classification_arrays(glyphs, labels, seed=seed, pool=pool, **options)
        return Labelled(arrays["images"], arrays["labels"])

    return tiles


def _cifar100_examples(data: CifarData) -> Examples:
    from gspdml.data.cifar import load_cifar

    if data.root is None:
        raise ConfigError(
            f"{FIELD}.data.root",
            "the folder holding cifar-100-python/ (gspdml pretrain RECIPE --data-root DIR, or "
            "a copy of the recipe with data.root set)",
        )
    cifar = load_cifar("cifar100", data.root)

    def examples(pool: str, seed: int) -> Labelled:
        if pool != "train":
            return Labelled(cifar.test, cifar.test_labels)
        images = cifar.train
        if data.augment:
            images = pad_crop_flip(images, np.random.default_rng([seed, 0xC1FA]))
        return Labelled(images, cifar.train_labels)

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
    recipe: Recipe,
    *,
    verbose: bool = False,
    device: Union[str, torch.device] = "auto",
    precision: Optional[PrecisionChoice] = None,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Train ``backbone -> GAP -> linear`` with cross-entropy on the recipe's examples (fresh
    draws every epoch; Adam, cosine decay) on ``device`` in ``precision`` (default: the recipe's),
    and return the backbone's state dict and a record with the held-out accuracy."""
    opts = recipe.train
    start = time.perf_counter()
    device = resolve_device(str(device))
    choice = precision or recipe_precision(recipe, device)
    torch.manual_seed(opts.seed)
    examples = recipe_examples(recipe)
    first = examples("train", opts.seed * 1000)
    mean, std = pixel_statistics(first.images)
    classes = int(first.labels.max()) + 1
    channels = 1 if first.images.ndim == 3 else int(first.images.shape[1])
    backbone = build_backbone(recipe.backbone, in_channels=channels, field=f"{FIELD}.backbone")
    classifier = nn.Linear(backbone.out_channels, classes)
    model = nn.Sequential(backbone, nn.AdaptiveAvgPool2d(1), nn.Flatten(), classifier).to(device)
    layout = memory_format(choice, device)
    optimizer = torch.optim.Adam(model.parameters(), lr=opts.lr, weight_decay=opts.weight_decay)
    scaler = torch.amp.GradScaler("cuda") if choice.precision == "fp16" else None
    steps = opts.epochs * -(-len(first.labels) // opts.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    rng = np.random.default_rng(np.random.SeedSequence([opts.seed, 0xBA7C]))
    meter = Progress(f"pre-training {recipe.name}", steps, "steps", enabled=verbose)
    model.train()
    for epoch in range(opts.epochs):
        tiles = first if epoch == 0 else examples("train", opts.seed * 1000 + epoch)
        x = _as_tensor(tiles.images, mean, std).to(device)
        y = torch.from_numpy(tiles.labels).to(device)
        order = torch.from_numpy(rng.permutation(len(y))).to(device)
        for i in range(0, len(order), opts.batch_size):
            index = order[i : i + opts.batch_size]
            with autocast_context(choice, device):
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
            meter.update(1, note=f"epoch {epoch + 1}/{opts.epochs}")
        if verbose:
            print(
                f"pre-training {recipe.name}: epoch {epoch + 1}/{opts.epochs}, loss {loss.item():.3f}, "
                f"{time.perf_counter() - start:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    meter.close()
    val = examples("val", opts.seed * 1000 + 999)
    accuracy = _accuracy(model, val, mean, std, choice, device)
    record = {
        "name": recipe.name,
        "key": content_key(recipe, choice.precision, device.type),
        "classes": classes,
        "val_accuracy": accuracy,
        "seconds": time.perf_counter() - start,
        "threads": torch.get_num_threads(),
        "mean": mean,
        "std": std,
        "device": str(device),
        "precision": choice.precision,
    }
    return {
        k: v.detach().cpu().clone().contiguous() for k, v in backbone.state_dict().items()
    }, record


@torch.no_grad()
def _accuracy(
    model: nn.Module,
    tiles: Labelled,
    mean: float,
    std: float,
    precision: PrecisionChoice,
    device: torch.device,
) -> float:
    model.eval()
    x, y = _as_tensor(tiles.images, mean, std).to(device), torch.from_numpy(tiles.labels).to(device)
    with autocast_context(precision, device):
        predicted = torch.cat([model(x[i : i + 512]).argmax(1) for i in range(0, len(y), 512)])
    return float((predicted == y).float().mean())
