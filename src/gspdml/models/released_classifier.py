"""The ImageNet-1k classifier of a released SimPool checkpoint: the linear ``head`` (``head.weight``
``[1000, d]``, ``head.bias``) that the supervised timm-fork files keep beside the network, on the
pooled vector of :func:`gspdml.models.simpool_release.released_embedder` (the [CLS] token after
the final LayerNorm, or SimPool's output), as the fork's ``forward_head`` applies it. The DINO
files hold a projection head for self-distillation, no classifier.
"""

from __future__ import annotations

import os
from typing import Union

from torch import nn

from gspdml.errors import DataError
from gspdml.models.pretrained import read_state_dict
from gspdml.models.simpool_release import WRAPPERS


def released_classifier(path: Union[str, os.PathLike[str]], width: int) -> nn.Linear:
    """The linear classifier ``head`` of the released file ``path`` for pooled vectors of
    ``width`` channels; a DataError naming the file when it carries none."""
    state = read_state_dict(path, wrappers=WRAPPERS)
    weight, bias = state.get("head.weight"), state.get("head.bias")
    if weight is None or bias is None or weight.dim() != 2 or weight.shape[1] != width:
        raise DataError(
            f"{path}: no linear classifier head.weight [classes, {width}] and head.bias (a DINO "
            "checkpoint has none: its classes need a linear probe); give the supervised release"
        )
    layer = nn.Linear(width, weight.shape[0])
    layer.weight.data.copy_(weight)
    layer.bias.data.copy_(bias.reshape(-1))
    return layer.eval()
