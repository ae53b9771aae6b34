"""Class-disjoint batch halves and ridge prediction across them, the core shared by ZSR and XML.

ZSR (GSP paper §4.3, Eq. 4.4, Algorithm 4; Gürbüz thesis §5.2.3)
and XML (XML paper §2, Eq. 2.8-2.10) both split a batch into two class-disjoint halves
``b1, b2``, fit a ridge regressor on one half and predict the other::

    A_k     = argmin_A sum_{i in b_k} ||A z_i - t_i||^2 + ridge ||A||_F^2     (P3 / Eq. 2.8)
    that_2  = A_1 z_j  for j in b2,      that_1 = A_2 z_j  for j in b1

ZSR's targets ``t`` are the class embeddings ``v_y`` (it then scores ``that`` against all
classes); XML's are the pooled vectors ``y`` (it then applies the DML loss to ``that``).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from gspdml.errors import ConfigError
from gspdml.ops.ridge import ridge_predict


def batch_halves(size: int, loss_name: str) -> tuple[slice, slice]:
    """The first and second half of a batch of ``size`` samples. That they share no class is the
    sampler's guarantee (``data.halves: true``), checked once before training
    (:class:`gspdml.losses.requirements.BatchRequirements`): reading labels would wait for the device.
    """
    if size < 2 or size % 2:
        raise ConfigError(
            "data.halves",
            f"{loss_name} needs an even batch of two class-disjoint halves, got {size} samples",
        )
    return slice(0, size // 2), slice(size // 2, size)


def ridge_across_halves(
    inputs: torch.Tensor, targets: torch.Tensor, labels: torch.Tensor, ridge: float, loss_name: str
) -> Iterator[tuple[slice, torch.Tensor]]:
    """``(half, that_half)`` for the second half predicted from the first, then the first from the
    second (module docstring); ``inputs`` ``[B, m]``, ``targets`` ``[B, d]``, ``that`` ``[B/2, d]``;
    differentiable in ``inputs`` and ``targets``."""
    first, second = batch_halves(labels.shape[0], loss_name)
    for fit, predict in ((first, second), (second, first)):
        yield predict, ridge_predict(inputs[fit], targets[fit], inputs[predict], ridge)
