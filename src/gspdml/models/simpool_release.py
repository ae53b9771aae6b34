"""The SimPool authors' released ImageNet checkpoints (github.com/billpsomas/simpool) as frozen
embedders: the backbone with its default pooling (the "Baseline" of Psomas thesis Table 3.9) or
with SimPool in its place, the weights read safely and loaded key for key.

The release stores ResNet-50 in torchvision's layout (``conv1``, ``bn1``, ``layer1..4``) and
SimPool as ``simpool.norm_patches`` (the LayerNorm of the features, eps 1e-6), ``simpool.wq``,
``simpool.wk`` (``d x d``, no bias) and, where trained with it, ``simpool.beta`` (shape
``[1]``); a model trained with GAP has no ``simpool.*`` keys. The self-supervised (DINO)
checkpoints wrap the weights: ``{"teacher": ..., "student": ..., "args": ...}``, keys
``backbone.<name>`` (the student's behind ``module.``) beside the projection head ``head.*``;
the evaluation reads the teacher, as DINO's own evaluations do. :func:`released_state_dict`
reads any of these layouts (``torch.load(weights_only=True)``: a pickle that would run code is
refused, :func:`gspdml.models.pretrained.read_state_dict`) and renames the keys to those of
:class:`~gspdml.models.embedder.Embedder` (:data:`RENAMES`); the classifier ``fc`` and the
DINO head are dropped. :func:`released_embedder` builds the embedder and requires every key to
fit, naming the missing and unexpected ones otherwise.

SimPool's parameters are those of :class:`~gspdml.pooling.simpool.SimPool` with
``gamma`` of the checkpoint's training (2.0 for the ResNet-50 release, Psomas thesis §3.4.4)
and ``use_beta`` when the file holds ``simpool.beta``. The minimum of the values is taken per
image (Eq. 3.66), not over the batch as the released code does, so that an image's embedding
does not depend on the batch it is embedded in (docs/paper-vs-code.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

import torch

from gspdml.errors import ConfigError, DataError
from gspdml.models.backbones import build_backbone
from gspdml.models.embedder import Embedder
from gspdml.pooling import build_pooling

#: the authors' key prefixes -> the embedder's (the first that matches renames a key)
RENAMES = (
    ("simpool.norm_patches.", "pooling.norm."),
    ("simpool.wq.", "pooling.wq."),
    ("simpool.wk.", "pooling.wk."),
    ("simpool.beta", "pooling.beta"),
)
#: what the evaluation drops: the ImageNet classifier and the DINO projection head
DROPPED = ("fc.", "head.")
#: the checkpoint entry read first when the file wraps several models (DINO: the teacher)
WRAPPERS = ("teacher", "state_dict", "model")
#: the poolings a released model was trained with
POOLINGS = ("gap", "simpool")


def released_state_dict(path: Union[str, os.PathLike]) -> dict[str, torch.Tensor]:
    """The weights of a released checkpoint under the embedder's names (module doc):
    ``backbone.<name>`` for the backbone, ``pooling.<name>`` for SimPool."""
    from gspdml.models.pretrained import read_state_dict

    state = read_state_dict(path, wrappers=WRAPPERS)
    renamed = {}
    for key, value in state.items():
        key = key.removeprefix("backbone.")
        if key.startswith(DROPPED):
            continue
        for old, new in RENAMES:
            if key.startswith(old):
                renamed[new + key[len(old) :]] = (
                    value.reshape(()) if new == "pooling.beta" else value
                )
                break
        else:
            renamed[f"backbone.{key}"] = value
    return renamed


def released_embedder(
    path: Union[str, os.PathLike],
    pooling: str,
    *,
    backbone: str = "resnet50",
    gamma: Optional[float] = 2.0,
) -> Embedder:
    """The frozen embedder of a released checkpoint: ``backbone`` with ``pooling`` (``gap``,
    the baseline, or ``simpool`` with ``gamma``), L2-normalised output, in eval mode. A file
    whose keys do not fit raises a :class:`~gspdml.errors.DataError` naming it and the missing
    and unexpected keys (in the embedder's names, :data:`RENAMES`)."""
    from gspdml.models.pretrained import load_weights

    if pooling not in POOLINGS:
        raise ConfigError("pooling", f"expected one of {list(POOLINGS)}, got {pooling!r}")
    state = released_state_dict(path)
    net = build_backbone({"name": backbone}, 3)
    if pooling == "simpool":
        options = {"gamma": gamma, "use_beta": "pooling.beta" in state, "min_scope": "sample"}
        layer = build_pooling({"name": "simpool", **options}, in_channels=net.out_channels)
    else:
        layer = build_pooling("gap", in_channels=net.out_channels)
    model = Embedder(net, layer)
    try:
        load_weights(model, state, source=str(Path(path)))
    except DataError as error:
        raise DataError(
            f"{error} (a {backbone} with {pooling} pooling; the authors' simpool.norm_patches, "
            "simpool.wq, simpool.wk and simpool.beta are pooling.norm, pooling.wq, pooling.wk "
            "and pooling.beta here, backbone keys are prefixed with backbone.)"
        ) from None
    return model.eval()
