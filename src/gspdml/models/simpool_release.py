"""The SimPool authors' released ImageNet checkpoints (github.com/billpsomas/simpool) as frozen
embedders: the backbone with its default pooling (the "Baseline" of Psomas thesis Table 3.9) or
with SimPool in its place, the weights read safely and loaded key for key.

The release stores ResNet-50 in torchvision's layout and ViT-S/16 in timm's
(:mod:`gspdml.models.released_vit`), SimPool as ``simpool.norm_patches`` (LayerNorm, eps 1e-6),
``simpool.wq``, ``simpool.wk`` and, where trained with it, ``simpool.beta`` (``[1]``); the
supervised ViT (the authors' timm fork) names it ``gp.pool.*``. DINO checkpoints wrap the
weights as ``{"teacher", "student", "args"}`` with keys ``backbone.<name>`` beside the head
``head.*``; the teacher is read, as DINO's evaluations do. Supervised timm checkpoints are
``{"state_dict", "args"}`` (the EMA copy is not read, as in timm's validation script).
:func:`released_state_dict` reads any of these (safely,
:func:`gspdml.models.pretrained.read_state_dict`) and renames the keys to the
:class:`~gspdml.models.embedder.Embedder`'s (:data:`PREFIXES`, :data:`RENAMES`), dropping the
classifier and DINO head; :func:`released_embedder` requires every key to fit.

The poolings (:data:`POOLINGS`): ``gap`` (ResNet-50's baseline), ``cls`` (ViT's: the [CLS]
token after the final LayerNorm) and ``simpool``, with ``gamma`` of the checkpoint's training
(2.0 for ResNet-50, 1.25 for ViT-S, Psomas thesis §3.4.4) and ``use_beta`` when the file holds
``simpool.beta``. On the DINO ViT, SimPool pools the last block's tokens and the final LayerNorm
becomes the embedder's ``pooled_norm``; on the supervised ViT it pools the normalised tokens.
The minimum of the values is per image (Eq. 3.66), not per batch as released
(docs/paper-vs-code.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

import torch
from torch import nn

from gspdml.errors import ConfigError, DataError
from gspdml.models.backbones import build_backbone
from gspdml.models.backbones.base import Backbone
from gspdml.models.embedder import Embedder
from gspdml.pooling import build_pooling

#: the authors' wrappers of the weights -> ours: DINO's ``backbone.``, the timm fork's pooling
PREFIXES = (("backbone.", ""), ("gp.pool.", "simpool."))
#: the authors' SimPool keys -> the embedder's (the first that matches renames a key)
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
POOLINGS = ("gap", "cls", "simpool")
#: the released backbones and the pooling each was trained with besides SimPool (the baseline)
BASELINES = {"resnet50": "gap", "vit": "cls"}


def released_state_dict(path: Union[str, os.PathLike[str]]) -> dict[str, torch.Tensor]:
    """The weights of a released checkpoint under the embedder's names (module doc):
    ``backbone.<name>`` for the backbone, ``pooling.<name>`` for SimPool."""
    from gspdml.models.pretrained import read_state_dict

    state = read_state_dict(path, wrappers=WRAPPERS)
    renamed = {}
    for key, value in state.items():
        for old, new in PREFIXES:
            if key.startswith(old):
                key = new + key[len(old) :]
        if key.startswith(DROPPED):
            continue
        for old, new in RENAMES:
            if key.startswith(old):  # the release's beta is [1], SimPool's a scalar
                renamed[new + key[len(old) :]] = (
                    value.reshape(()) if new == "pooling.beta" else value
                )
                break
        else:
            renamed[f"backbone.{key}"] = value
    return renamed


def _vit(
    state: dict[str, torch.Tensor], pooling: str, pooled_norm: bool, source: str, any_size: bool
) -> tuple[Backbone, Optional[nn.Module]]:
    """The authors' ViT for ``pooling`` (module doc) and the LayerNorm of the pooled vector
    (``pooled_norm``: the final ``norm`` moves there, renamed in ``state``); ``any_size``: it
    embeds images of any size (:class:`~gspdml.models.released_vit.ReleasedViT`)."""
    from gspdml.models.released_vit import ReleasedViT, vit_shape

    shape = vit_shape({k.removeprefix("backbone."): v for k, v in state.items()}, source)
    if pooling == "cls" and not shape.class_token:
        raise DataError(
            f"{source}: this ViT has no [CLS] token (a SimPool model), so it has no baseline "
            "[CLS] embedding; give the file released for the baseline (cls pooling)"
        )
    output = "cls" if pooling == "cls" else "tokens"
    net = ReleasedViT(shape, output, final_norm=not pooled_norm, any_size=any_size)
    if not pooled_norm:
        return net, None
    for key in [k for k in state if k.startswith("backbone.norm.")]:
        state["pooled_norm." + key.removeprefix("backbone.norm.")] = state.pop(key)
    return net, nn.LayerNorm(shape.width, eps=1e-6)


def released_embedder(
    path: Union[str, os.PathLike[str]],
    pooling: str,
    *,
    backbone: str = "resnet50",
    gamma: Optional[float] = 2.0,
    pooled_norm: bool = False,
    any_size: bool = False,
) -> Embedder:
    """The frozen embedder of a released checkpoint: ``backbone`` (``resnet50`` or ``vit``)
    with ``pooling`` (``gap`` or ``cls``, the baselines, or ``simpool`` with ``gamma``; on a
    ViT, ``pooled_norm`` puts the final LayerNorm after the pooling, as the DINO fork does;
    ``any_size`` interpolates its position embeddings to each image's grid), L2-normalised
    output, in eval mode; keys that do not fit raise a :class:`~gspdml.errors.DataError`."""
    from gspdml.models.pretrained import load_weights

    if pooling not in POOLINGS:
        raise ConfigError("pooling", f"expected one of {list(POOLINGS)}, got {pooling!r}")
    if backbone not in BASELINES:
        raise ConfigError("backbone", f"expected one of {list(BASELINES)}, got {backbone!r}")
    if pooling not in (BASELINES[backbone], "simpool"):
        choices = [BASELINES[backbone], "simpool"]
        raise ConfigError("pooling", f"the released {backbone} pools with one of {choices}")
    state = released_state_dict(path)
    norm: Optional[nn.Module] = None
    net: Backbone
    if backbone == "vit":
        net, norm = _vit(state, pooling, pooled_norm, str(path), any_size)
    else:
        net = build_backbone({"name": backbone}, 3)
    if pooling == "simpool":
        options = {"gamma": gamma, "use_beta": "pooling.beta" in state, "min_scope": "sample"}
        layer = build_pooling({"name": "simpool", **options}, in_channels=net.out_channels)
    else:  # GAP; on the [CLS] token alone, [B, 1, C], it passes the token unchanged
        layer = build_pooling("gap", in_channels=net.out_channels)
    model = Embedder(net, layer, pooled_norm=norm)
    try:
        load_weights(model, state, source=str(Path(path)))
    except DataError as error:
        raise DataError(
            f"{error} (a {backbone} with {pooling} pooling; the authors' simpool.norm_patches, "
            "simpool.wq, simpool.wk and simpool.beta are pooling.norm, pooling.wq, pooling.wk "
            "and pooling.beta here, backbone keys are prefixed with backbone.)"
        ) from None
    return model.eval()
