"""Shared inputs for the loss tests: small float64 batches with a fixed class structure."""

import pytest
import torch
import torch.nn.functional as F


def _batch(seed: int = 0, classes: int = 4, per_class: int = 4, dim: int = 8, shuffle: bool = True):
    """``(embeddings [N, dim] float64, unit norm, requires_grad; labels int64 [N])``."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.arange(classes).repeat_interleave(per_class)
    if shuffle:
        labels = labels[torch.randperm(len(labels), generator=gen)]
    emb = F.normalize(torch.randn(len(labels), dim, generator=gen, dtype=torch.float64), dim=1)
    return emb.requires_grad_(True), labels


@pytest.fixture
def make_batch():
    return _batch


def pairs_of(labels, ref_labels, ref_self):
    """Yield ``(i, j, same_class)`` over the valid (anchor, reference) pairs, self excluded by index."""
    for i in range(len(labels)):
        for j in range(len(ref_labels)):
            if ref_self is not None and int(ref_self[i]) == j:
                continue
            yield i, j, bool(labels[i] == ref_labels[j])


@pytest.fixture
def valid_pairs():
    return pairs_of
