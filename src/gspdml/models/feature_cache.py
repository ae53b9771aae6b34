"""Memoised feature maps of a frozen backbone (``model.cache_backbone_features``).

A frozen backbone maps an image to the same map at every step, so on data without random
augmentation (the collages, linear probes) each map is computed once and training costs only
what follows the backbone: this makes a large frozen backbone (EfficientNet-Lite0 at 256 px,
~0.2 s per image on one CPU core) usable for the pooling comparisons on a CPU.

An entry is keyed by digests of the backbone's weights (recomputed when a weight tensor changes,
e.g. by ``load_state_dict``), a content key of the image computed on its device
(:func:`image_keys`: only 16 bytes per image reach the host, and the maps stay on the batch's
device), and by the autocast state, so a stale map is never read. Maps are kept up to a byte
budget. Cached maps equal a fresh forward up to the rounding of another batch composition (a
backbone with dropout left on would be made deterministic). Computing maps prints progress lines
(:class:`gspdml.progress.Progress`).
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import torch
from torch import nn

from gspdml.progress import Progress

#: default byte budget of the process-wide cache
MAX_BYTES = 4 << 30


#: the hashes of :func:`image_keys`, each with its own weights
_HASHES = 2
_BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
#: values hashed at once by :func:`image_keys` (its int64 temporaries: 32 MiB each)
_KEY_ELEMENTS = 1 << 22


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().to("cpu").reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()


@functools.lru_cache(maxsize=8)
def _hash_weights(numel: int, device: torch.device) -> torch.Tensor:
    """Fixed odd pseudo-random int64 weights ``[_HASHES, numel]`` on ``device``."""
    generator = torch.Generator().manual_seed(numel)
    weights = torch.randint(0, 2**62, (_HASHES, numel), generator=generator) * 2 + 1
    return weights.to(device)


def image_keys(images: torch.Tensor) -> list[tuple[int, ...]]:
    """A content key per image of ``images`` ``[B, ...]``, computed on the images' device.

    The key is ``sum_i w_hi b_i mod 2^64`` for h = 1, 2, with ``b_i`` the bit pattern of value i
    (a signed integer of the value's width) and ``w_hi`` fixed odd 64-bit weights drawn at
    random. Equal images get equal keys. For two different images, take a value where their bit
    patterns differ by ``d`` with the fewest trailing zero bits v: over the draw of its weight,
    one sum collides with probability at most 2^(v - 63), so both with at most 2^(2v - 126):
    2^-64 for values up to 32 bits wide (float32, bf16, uint8 images), where v <= 31. Only the
    ``[B, 2]`` keys reach the host.
    """
    flat = images.detach().reshape(len(images), -1)
    weights = _hash_weights(flat.shape[1], flat.device)
    rows = max(1, _KEY_ELEMENTS // max(1, flat.shape[1]))  # int64 temporaries in bounded memory
    sums = []
    for part in flat.split(rows):
        bits = part.contiguous().view(_BITS[part.element_size()]).long()
        sums.append(torch.stack([(bits * w).sum(1) for w in weights], 1))  # wraps mod 2^64
    return [tuple(row) for row in torch.cat(sums).tolist()]


class FeatureCache:
    """Feature maps by (weights, image, autocast state); see the module docstring."""

    def __init__(self, max_bytes: int = MAX_BYTES, progress: bool = True):
        self.max_bytes = max_bytes
        self.progress = progress
        self._meter: Progress | None = None
        self.stored_bytes = 0
        self.hits = self.misses = 0
        self._maps: dict[tuple[str, tuple[Any, ...], tuple[str, bool, torch.dtype]], torch.Tensor]
        self._maps = {}
        # id(backbone) -> (tensor versions, digest)
        self._weights: dict[int, tuple[tuple[tuple[str, int, int], ...], str]] = {}

    def weights_digest(self, backbone: nn.Module) -> str:
        """Digest of the backbone's state, recomputed only when a tensor was replaced or modified."""
        state = backbone.state_dict(keep_vars=True)
        versions = tuple((name, id(t), t._version) for name, t in state.items())
        known = self._weights.get(id(backbone))
        if known is not None and known[0] == versions:
            return known[1]
        digest = hashlib.blake2b(digest_size=16)
        for name, tensor in state.items():
            digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
            digest.update(_tensor_bytes(tensor))
        self._weights[id(backbone)] = (versions, digest.hexdigest())
        return digest.hexdigest()

    def __call__(self, backbone: nn.Module, images: torch.Tensor) -> torch.Tensor:
        """``backbone(images)``, reading the maps of images seen before from the cache."""
        device = images.device.type
        precision = (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
        weights = self.weights_digest(backbone)
        shape = (str(images.dtype), *images.shape[1:])
        keys = [(weights, (*content, *shape), precision) for content in image_keys(images)]
        missing = [i for i, key in enumerate(keys) if key not in self._maps]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        fresh = {}
        if missing:
            with torch.no_grad():
                computed = backbone(images[missing])
            for i, tensor in zip(missing, computed):
                fresh[i] = tensor
                size = tensor.numel() * tensor.element_size()
                if self.stored_bytes + size <= self.max_bytes:
                    self._maps[keys[i]] = tensor.clone()
                    self.stored_bytes += size
            self._count(len(missing))
        return torch.stack(
            [fresh[i] if i in fresh else self._maps[key] for i, key in enumerate(keys)]
        )

    def _count(self, computed: int) -> None:
        """Progress lines of the maps computed (none for hits: a pass over cached data is fast)."""
        if self._meter is None:
            self._meter = Progress(
                "feature cache (each backbone map is computed once)", unit="maps"
            )
        self._meter.enabled = self.progress  # a run's trainer.progress sets it
        self._meter.update(computed, note=f"{self.stored_bytes / 2**20:.0f} MiB kept")

    def clear(self) -> None:
        self._maps.clear()
        self._weights.clear()
        self.stored_bytes = self.hits = self.misses = 0
        self._meter = None


#: the cache every embedder with ``cache_backbone_features`` shares, so that the runs of one
#: process (an experiment's configurations and seeds) compute each map once
SHARED = FeatureCache()
