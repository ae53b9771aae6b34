"""A tiny, randomly initialised CLIP-style model (no downloads) for the composed-retrieval tests,
and a factory usable as the model spec ``python:cir_tiny_clip:build``."""

from __future__ import annotations

import torch
from torch import nn

from gspdml.cir.backends import clip_preprocess
from gspdml.cir.vl_model import VisionLanguageModel, load_weights

VOCAB, LENGTH, IMAGE_SIZE = 97, 8, 16


class TinyCLIP(nn.Module):
    def __init__(self, dim: int = 16, seed: int = 0):
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.visual = nn.Sequential(
                nn.Conv2d(3, 8, 3, stride=2, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(8, dim),
            )
            self.token_embedding = nn.Embedding(VOCAB, 12)
            self.text_projection = nn.Linear(12, dim)

    def encode_image(self, pixels):
        return self.visual(pixels)

    def encode_text(self, tokens):
        mask = (tokens > 0).float()[..., None]
        mean = (self.token_embedding(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.text_projection(mean)


def tokenize(texts):
    """Words to ids 1..VOCAB-1 by a fixed polynomial hash of their characters; 0 pads."""
    rows = []
    for text in texts:
        ids = [
            1 + sum(ord(c) * 31**i for i, c in enumerate(word)) % (VOCAB - 1)
            for word in text.lower().split()
        ][:LENGTH]
        rows.append(ids + [0] * (LENGTH - len(ids)))
    return torch.tensor(rows, dtype=torch.long)


def wrap(module: TinyCLIP, model_id: str = "tiny-clip", device: str = "cpu") -> VisionLanguageModel:
    return VisionLanguageModel(
        module.encode_image,
        module.encode_text,
        tokenize,
        clip_preprocess(IMAGE_SIZE),
        model_id,
        module=module,
        device=device,
    )


def build(weights=None, device="cpu"):
    module = TinyCLIP(seed=0)
    if weights is not None:
        load_weights(module, weights)
    return wrap(module, f"tiny-clip:{weights}", device)
