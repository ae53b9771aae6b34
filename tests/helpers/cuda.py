"""Marks and switches of the GPU tests (``pytest -m gpu``; ``scripts/gpu_check.sh`` runs them)."""

import pytest
import torch

from gspdml.compat.tf32 import without_tf32

#: ``pytestmark = CUDA``: a ``gpu`` test, skipped where torch sees no CUDA device
CUDA = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs CUDA (torch.cuda.is_available() is False)"
    ),
]


def full_float32():
    """float32 products in full precision on CUDA (no TF32 in matmuls or convolutions), so that a
    CUDA result can be compared with the CPU's to float32 rounding."""
    return without_tf32(convolutions=True)
