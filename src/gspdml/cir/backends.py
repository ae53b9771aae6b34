"""Build a :class:`~gspdml.cir.vl_model.VisionLanguageModel` from a model spec, offline.

Specs (``load_model(spec, weights=None)``):

* ``clip`` = ``open_clip:ViT-L-14@openai`` — OpenAI CLIP ViT-L/14 (FreeDom, WeiCom; Psomas thesis
  §4.4.1, §5.4.1); ``remoteclip`` = ``open_clip:ViT-L-14@remoteclip`` — RemoteCLIP ViT-L/14.
* ``open_clip:ARCH[@TAG]`` — an open_clip architecture; weights from ``weights`` (a local
  state-dict file) or, for a tag, from the local Hugging Face / open_clip cache.
* ``hf:REPO_OR_DIR`` — a transformers ``CLIPModel`` from a local directory or the local HF cache.
* ``python:MODULE:FUNCTION`` — a user factory ``FUNCTION(weights=None, device="cpu")`` returning a
  :class:`~gspdml.cir.vl_model.VisionLanguageEncoder` (any other model).

Nothing is ever downloaded: the weights are located *before* the library is imported
(``HF_HUB_OFFLINE=1`` is set for it too), and when they are not local one
:class:`~gspdml.cir.vl_model.WeightsUnavailableError` says what was looked for and what to provide.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

import torch
from PIL import Image

from gspdml.data.transforms import CenterCrop, Compose, Normalize, Resize, ToTensor
from gspdml.errors import ConfigError
from gspdml.file_digest import file_sha256

from .vl_model import (
    VisionLanguageEncoder,
    VisionLanguageModel,
    WeightsUnavailableError,
    load_weights,
    require,
)

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: the weight files of an open_clip and of a transformers checkpoint on the hub
OPEN_CLIP_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
HF_FILES = ("model.safetensors", "pytorch_model.bin")
ALIASES = {"clip": "open_clip:ViT-L-14@openai", "remoteclip": "open_clip:ViT-L-14@remoteclip"}

# (arch, tag) -> where the checkpoint lives on the Hugging Face hub, and whether the architecture
# uses QuickGELU. The OpenAI weights need QuickGELU (open_clip's pretrained config). RemoteCLIP is
# loaded into plain ViT-L-14 as in its README; the WeiCom code (billpsomas/rscir) also builds plain
# ViT-L-14 for the OpenAI weights — pass quick_gelu=False for that parity.
KNOWN_CHECKPOINTS: dict[tuple[str, Optional[str]], dict[str, Any]] = {
    ("ViT-L-14", "openai"): dict(
        repo="timm/vit_large_patch14_clip_224.openai",
        files=OPEN_CLIP_FILES,
        quick_gelu=True,
    ),
    ("ViT-L-14", "remoteclip"): dict(
        repo="chendelong/RemoteCLIP", files=("RemoteCLIP-ViT-L-14.pt",), quick_gelu=False
    ),
}


def clip_preprocess(
    size: int = 224, mean: Sequence[float] = CLIP_MEAN, std: Sequence[float] = CLIP_STD
) -> Callable[[Image.Image], torch.Tensor]:
    """CLIP's evaluation transform (the standard OpenAI/open_clip ViT-L/14 one; the thesis does not
    specify it): bicubic resize of the short side, centre crop, CLIP mean/std. Returns
    ``PIL image -> [3, size, size]``."""
    transform = Compose(
        [Resize(size, Image.Resampling.BICUBIC), CenterCrop(size), ToTensor(), Normalize(mean, std)]
    )
    return lambda image: transform(image, None)


def hf_cache_dirs() -> list[Path]:
    """The Hugging Face hub cache directories, in the order huggingface_hub resolves them."""
    if os.environ.get("HF_HUB_CACHE"):
        return [Path(os.environ["HF_HUB_CACHE"]).expanduser()]
    default = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")) / "huggingface"
    home = Path(os.environ.get("HF_HOME", default)).expanduser()
    return [home / "hub"]


def hub_folders(repo: str) -> list[Path]:
    """The folders of model ``repo`` in the Hugging Face hub caches."""
    return [cache / ("models--" + repo.replace("/", "--")) for cache in hf_cache_dirs()]


def cached_hub_file(repo: str, filenames: tuple[str, ...]) -> Optional[Path]:
    """The first of ``filenames`` in any cached snapshot of model ``repo`` (no network)."""
    for folder in hub_folders(repo):
        for snapshot in sorted((folder / "snapshots").glob("*")):
            for name in filenames:
                if (snapshot / name).is_file():
                    return snapshot / name
    return None


def _offline() -> None:
    """Forbid hub downloads for the libraries about to be imported (and for huggingface_hub if an
    earlier import already read its settings)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    constants: Any = sys.modules.get("huggingface_hub.constants")  # its settings are plain globals
    if constants is not None:
        constants.HF_HUB_OFFLINE = True


def _missing(what: str, looked: str, provide: str) -> WeightsUnavailableError:
    return WeightsUnavailableError(
        f"weights for {what} are not available offline (looked in {looked}); {provide}"
    )


def load_model(
    spec: str, weights: Optional[str] = None, device: str = "cpu", quick_gelu: Optional[bool] = None
) -> VisionLanguageEncoder:
    """A :class:`~gspdml.cir.vl_model.VisionLanguageEncoder` for ``spec`` (see the module docstring)."""
    spec = ALIASES.get(spec, spec)
    kind, _, rest = spec.partition(":")
    if kind == "open_clip" and rest:
        arch, _, tag = rest.partition("@")
        return _open_clip(arch, tag or None, weights, device, quick_gelu)
    if kind == "hf" and rest:
        return _transformers(rest, weights, device)
    if kind == "python" and rest.count(":") == 1:
        module, function = rest.split(":")
        try:
            factory = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError) as error:
            raise ConfigError("model", f"cannot import factory {rest!r}: {error}") from None
        model: VisionLanguageEncoder = factory(weights=weights, device=device)
        if weights is not None and Path(weights).expanduser().is_file():
            # the weights' content, so that the feature cache never mixes two checkpoints
            model.model_id = f"{model.model_id}@{file_sha256(Path(weights).expanduser())}"
        return model
    raise ConfigError(
        "model",
        f"unknown model spec {spec!r}; use clip, remoteclip, open_clip:ARCH[@TAG], "
        "hf:REPO_OR_DIR or python:MODULE:FUNCTION",
    )


def _open_clip(
    arch: str, tag: Optional[str], weights: Optional[str], device: str, quick_gelu: Optional[bool]
) -> VisionLanguageModel:
    known = KNOWN_CHECKPOINTS.get((arch, tag), {})
    if weights is not None:
        path = Path(weights).expanduser()
        if not path.is_file():
            raise _missing(
                f"open_clip {arch}",
                str(path),
                "pass an existing checkpoint file as weights (--weights PATH)",
            )
    elif tag is None:
        raise ConfigError(
            "weights", f"open_clip:{arch} without a @TAG needs a local checkpoint (--weights PATH)"
        )
    else:
        path = _cached_open_clip(arch, tag, known)
    _offline()
    open_clip = require("open_clip", "clip", "open_clip_torch")
    use_quick_gelu = known.get("quick_gelu", False) if quick_gelu is None else quick_gelu
    model = open_clip.create_model(arch, pretrained=None, force_quick_gelu=use_quick_gelu)
    load_weights(model, path)
    size = model.visual.image_size
    size = size[0] if isinstance(size, (tuple, list)) else size
    # a local file by its content, so that the feature cache never mixes two checkpoints
    model_id = f"open_clip:{arch}@{tag if weights is None else file_sha256(path)}"
    model_id += "+quickgelu" if use_quick_gelu else ""
    return VisionLanguageModel(
        model.encode_image,
        model.encode_text,
        open_clip.get_tokenizer(arch),
        clip_preprocess(int(size)),
        model_id,
        module=model,
        device=device,
    )


def _cached_open_clip(arch: str, tag: str, known: dict[str, Any]) -> Path:
    if known:
        repo, files, url_file = known["repo"], known["files"], None
    else:
        _offline()
        release = require("open_clip", "clip", "open_clip_torch").get_pretrained_cfg(arch, tag)
        if not release:  # open_clip's record of the released weights
            raise ConfigError("model", f"open_clip has no pretrained tag {tag!r} for {arch!r}")
        repo = release.get("hf_hub", "").rstrip("/")
        files = OPEN_CLIP_FILES
        url_file = Path(release["url"]).name if release.get("url") else None
    found = cached_hub_file(repo, files) if repo else None
    if found is None and url_file and (Path("~/.cache/clip").expanduser() / url_file).is_file():
        found = Path("~/.cache/clip").expanduser() / url_file
    if found is None:
        raise _missing(
            f"open_clip {arch}@{tag}",
            ", ".join(map(str, hub_folders(repo))) if repo else "~/.cache/clip",
            f"download {' or '.join(files)} from the hub repo {repo!r} on a connected machine and pass it "
            "with --weights PATH (a state-dict file), or copy the hub cache here",
        )
    return found


def _transformers(source: str, weights: Optional[str], device: str) -> VisionLanguageModel:
    if weights is not None:
        raise ConfigError(
            "weights", "hf: models load their weights from their directory; do not pass --weights"
        )
    local = Path(source).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise _missing(
                f"hf:{source}",
                str(local),
                "the directory must hold config.json and the model weights",
            )
        directory = local
    else:
        found = cached_hub_file(source, HF_FILES)
        if found is None or not (found.parent / "config.json").is_file():
            raise _missing(
                f"hf:{source}",
                ", ".join(map(str, hub_folders(source))),
                "pass a local directory saved with CLIPModel.save_pretrained "
                "(hf:/path/to/dir) or copy the hub cache here",
            )
        directory = found.parent
    _offline()
    transformers = require("transformers", "transformers", "transformers")
    model = transformers.CLIPModel.from_pretrained(str(directory), local_files_only=True)
    processor = transformers.CLIPProcessor.from_pretrained(str(directory), local_files_only=True)

    def tokenize(texts: list[str]) -> dict[str, torch.Tensor]:
        return dict(processor.tokenizer(texts, padding=True, truncation=True, return_tensors="pt"))

    def preprocess(image: Image.Image) -> torch.Tensor:
        batch = processor.image_processor(images=[image], return_tensors="pt")
        pixels: torch.Tensor = batch["pixel_values"][0]
        return pixels

    files = [directory / name for name in HF_FILES]
    held = [file_sha256(file) for file in files if file.is_file()]  # the feature cache's key
    return VisionLanguageModel(
        lambda pixels: model.get_image_features(pixel_values=pixels),
        model.get_text_features,
        tokenize,
        preprocess,
        f"hf:{source}" + "".join(f"@{digest}" for digest in held),
        module=model,
        device=device,
    )
