"""Full float32 products on CUDA for a block of code, through the TF32 switches this torch has.

torch >= 2.9 sets TF32 per backend with ``fp32_precision`` (``"ieee"`` or ``"tf32"``) and raises
when the legacy ``allow_tf32`` flags are read after the new ones were set differently ("you have
used mix of the legacy and new APIs"); older torch has only the legacy flags.
:func:`without_tf32` uses the new switches where they exist, and restores them after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def without_tf32(convolutions: bool = False) -> Iterator[None]:
    """No TF32 in CUDA matmuls (and, with ``convolutions``, in cuDNN convolutions) and float32
    sums in bf16 matmuls (no reduced-precision reduction) inside the block."""
    # (owner, switch, value inside the block); the owners are torch.backends modules and objects
    # whose switches differ between torch releases, hence object
    matmul = torch.backends.cuda.matmul
    switches: list[tuple[object, str, object]] = [
        (matmul, "allow_bf16_reduced_precision_reduction", False)
    ]
    if hasattr(matmul, "fp32_precision"):
        switches.append((matmul, "fp32_precision", "ieee"))
        if convolutions:  # torch.backends.cudnn.conv is set up at import; its stubs omit it
            conv = torch.backends.cudnn.conv  # type: ignore[attr-defined]
            switches.append((conv, "fp32_precision", "ieee"))
    else:
        switches.append((matmul, "allow_tf32", False))
        switches += [(torch.backends.cudnn, "allow_tf32", False)] if convolutions else []
    saved = [getattr(owner, name) for owner, name, _ in switches]
    try:
        for owner, name, value in switches:
            setattr(owner, name, value)
        yield
    finally:
        for (owner, name, _), value in zip(switches, saved):
            setattr(owner, name, value)
