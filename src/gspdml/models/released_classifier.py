"""The ImageNet classifier stored in a released supervised checkpoint
(:mod:`gspdml.models.simpool_release`): the linear layer after the pooling that the supervised
training learned with the network (timm's ``head.weight`` / ``head.bias``, torchvision's
``fc.weight`` / ``fc.bias``). The frozen embedder drops it; the top-1 accuracy of a supervised
model (Psomas thesis Table 3.2) is that of this layer on the embedder's pooled vector before L2
normalisation (in timm's ViT: the [CLS] token or SimPool's output, then ``head``). A DINO
checkpoint has none: its ``head.*`` is the projection head (``head.mlp.*``,
``head.last_layer.*``).
"""

from __future__ import annotations

import os
from typing import Optional, Union

import torch
from torch import nn

#: the released classifiers' names: timm's, torchvision's
CLASSIFIERS = ("head", "fc")


def released_classifier(path: Union[str, os.PathLike[str]]) -> Optional[nn.Linear]:
    """The classifier stored in the checkpoint ``path`` (module doc) as a frozen linear layer,
    or None when the file holds none."""
    from gspdml.models.pretrained import read_state_dict
    from gspdml.models.simpool_release import WRAPPERS

    state = read_state_dict(path, wrappers=WRAPPERS)
    for name in CLASSIFIERS:
        weight, bias = state.get(f"{name}.weight"), state.get(f"{name}.bias")
        if weight is not None and bias is not None and weight.dim() == 2:
            layer = nn.Linear(weight.shape[1], weight.shape[0])
            with torch.no_grad():
                layer.weight.copy_(weight)
                layer.bias.copy_(bias)
            return layer.requires_grad_(False).eval()
    return None
