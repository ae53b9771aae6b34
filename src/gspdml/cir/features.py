"""Embedding image databases and vocabularies once: a safetensors feature cache.

A database of 30,400 images or a 20,931-word vocabulary costs hours of ViT-L/14 time on a CPU,
so features are stored in ``<directory>/<kind>-<key>.safetensors`` (no pickle), written
atomically, with JSON metadata. The key hashes the model id (with a local checkpoint's content
hash) and the items — for images the resolved path and the content hash of every file, so an
edited image invalidates the entry; an entry whose metadata does not match is recomputed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from gspdml.data.images import load_image
from gspdml.errors import DataError
from gspdml.file_digest import file_sha256
from gspdml.output_files import atomic_write

from .vl_model import VisionLanguageEncoder

FORMAT = "gspdml-cir-features/1"


def _image_items(paths: Sequence[str | Path]) -> list[list[Optional[str]]]:
    """Each image as ``[resolved path, content hash]`` (None for a missing file: the loader
    names it)."""
    items: list[list[Optional[str]]] = []
    for path in paths:
        resolved = Path(path).expanduser().resolve()
        items.append([str(resolved), file_sha256(resolved) if resolved.is_file() else None])
    return items


class FeatureCache:
    """Features keyed by (model id, kind, items) under ``directory``."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory).expanduser()

    @staticmethod
    def default_directory() -> Path:
        """``$GSPDML_CACHE/cir-features``: the cache of ``gspdml cir`` and ``gspdml reproduce``."""
        from gspdml.data.cache import cache_dir

        return cache_dir() / "cir-features"

    def path(self, model_id: str, kind: str, items: list[Any]) -> Path:
        digest = hashlib.sha256(json.dumps([model_id, kind, items]).encode()).hexdigest()[:20]
        return self.directory / f"{kind}-{digest}.safetensors"

    def load(self, model_id: str, kind: str, items: list[Any]) -> Optional[torch.Tensor]:
        path = self.path(model_id, kind, items)
        if not path.is_file():
            return None
        try:
            with safe_open(str(path), framework="pt") as handle:
                meta = json.loads((handle.metadata() or {}).get("gspdml", "null"))
                if meta != {"format": FORMAT, "model": model_id, "kind": kind, "items": items}:
                    return None
                features: torch.Tensor = handle.get_tensor("features")
                return features
        except Exception:  # a corrupt entry is recomputed and replaced
            return None

    def store(self, model_id: str, kind: str, items: list[Any], features: torch.Tensor) -> Path:
        path = self.path(model_id, kind, items)
        meta = {"format": FORMAT, "model": model_id, "kind": kind, "items": items}
        tensors = {"features": features.detach().to("cpu", torch.float32).contiguous()}
        atomic_write(
            path, lambda tmp: save_file(tensors, tmp, metadata={"gspdml": json.dumps(meta)})
        )
        return path


def encode_image_files(
    model: VisionLanguageEncoder,
    paths: Sequence[str | Path],
    batch_size: int = 32,
    cache: Optional[FeatureCache] = None,
) -> torch.Tensor:
    """f(x) ``[N, D]`` of image files (decoded by :func:`gspdml.data.images.load_image`, which
    names an unreadable file), from ``cache`` when it holds them."""
    if not paths:
        raise DataError("no image files to encode")
    items = _image_items(paths)
    if cache is not None and (stored := cache.load(model.model_id, "images", items)) is not None:
        return stored
    chunks = []
    for start in range(0, len(paths), batch_size):
        pixels = torch.stack(
            [model.preprocess(load_image(p)) for p in paths[start : start + batch_size]]
        )
        chunks.append(model.encode_image(pixels))
    features = torch.cat(chunks)
    if cache is not None:
        cache.store(model.model_id, "images", items, features)
    return features


def encode_texts(
    model: VisionLanguageEncoder,
    texts: Sequence[str],
    batch_size: int = 256,
    cache: Optional[FeatureCache] = None,
) -> torch.Tensor:
    """g(t) ``[N, D]`` of strings (a vocabulary, target texts), from ``cache`` when it holds them."""
    items = list(texts)
    if not items:
        raise DataError("no texts to encode")
    if cache is not None and (stored := cache.load(model.model_id, "texts", items)) is not None:
        return stored
    features = torch.cat(
        [model.encode_text(items[i : i + batch_size]) for i in range(0, len(items), batch_size)]
    )
    if cache is not None:
        cache.store(model.model_id, "texts", items, features)
    return features
