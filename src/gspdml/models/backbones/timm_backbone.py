"""Any timm model as a backbone (optional extra ``timm``): CNN maps or ViT patch tokens.

timm (and torchvision) are imported only when such a backbone is built. ``forward_features``
gives CNN maps ``[B, C, h, w]``, or ViT tokens from which the prefix tokens (CLS, registers) are
dropped: ``[B, N, C]``, SimPool's input (Psomas thesis Ch. 3); ``output="map"`` arranges tokens
as ``[B, C, h, w]``. Weights are never fetched: ``pretrained: true`` looks in the Hugging Face
(or torch-hub) cache and raises one
:class:`~gspdml.models.pretrained.WeightsNotFoundError` naming the file; ``pretrained: <path>``
loads a local file through timm (which adapts classifier, position embeddings, input channels).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import torch

from gspdml.errors import ConfigError, DataError
from gspdml.models.backbones.base import BACKBONES, Backbone, FreezeBN
from gspdml.models.pretrained import (
    PretrainedSpec,
    WeightsNotFoundError,
    hub_checkpoint,
    resolve_weights_path,
)

FIELD = "model.backbone"
OUTPUTS = ("auto", "tokens", "map")
HF_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def import_timm(field: str = FIELD) -> ModuleType:
    """Import timm (applying the torchvision CPU-build shim first), or raise a
    :class:`ConfigError` that names the missing optional extra."""
    from gspdml.compat.torchvision_shim import define_missing_schemas

    define_missing_schemas()
    try:
        return importlib.import_module("timm")
    except ImportError as error:
        raise ConfigError(
            field,
            f"this backbone needs the optional 'timm' extra (timm and torchvision), which cannot be imported ({error}); "
            "install it with: pip install -c constraints.txt 'gspdml[timm]'",
        ) from error


@contextmanager
def _hub_offline() -> Iterator[None]:
    """Set ``HF_HUB_OFFLINE=1`` while timm runs, so that nothing tries the network."""
    previous = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = previous


def cached_timm_weights(timm: ModuleType, model: str, field: str) -> Path:
    """The on-disk file of timm's default pretrained weights for ``model``, without network."""
    cfg = timm.models.get_pretrained_cfg(model, allow_unregistered=False)
    if cfg is None:
        raise ConfigError(
            field, f"timm has no pretrained weights for {model!r}; give a file path instead"
        )
    if cfg.hf_hub_id:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.constants import HF_HUB_CACHE

        names = (cfg.hf_hub_filename,) if cfg.hf_hub_filename else HF_WEIGHT_FILES
        for name in names:
            found = try_to_load_from_cache(cfg.hf_hub_id, name)
            if isinstance(found, str):
                return Path(found)
        folder = Path(HF_HUB_CACHE) / ("models--" + cfg.hf_hub_id.replace("/", "--"))
        raise WeightsNotFoundError(
            field,
            f"pretrained weights for timm model {model!r} not found: expected the Hugging Face Hub file "
            f"{cfg.hf_hub_id}/{names[0]} in the cache {folder} (fetch it where there is internet with "
            f"`hf download {cfg.hf_hub_id} {names[0]}` and copy the cache folder), or set {field} to a local file path",
        )
    if cfg.url:
        filename = cfg.url.rsplit("/", 1)[-1]
        return hub_checkpoint(
            field=field, filenames=(filename,), url=cfg.url, what=f"timm model {model!r}"
        )
    raise ConfigError(
        field, f"timm lists no downloadable weights for {model!r}; give a file path instead"
    )


@BACKBONES.register("timm")
class TimmBackbone(Backbone):
    """A timm model without its classifier and global pooling; ``pretrained``: true, false or a
    path.

    Args:
        model: the timm model name (e.g. ``resnet50``, ``vit_small_patch16_224``).
        output: ``auto`` (maps for CNNs, patch tokens for ViTs), ``tokens`` or ``map``.
        model_kwargs: passed to ``timm.create_model`` (e.g. ``{img_size: 64}``).
    """

    def __init__(
        self,
        model: str = "resnet50",
        in_channels: int = 3,
        pretrained: PretrainedSpec = False,
        freeze_bn: FreezeBN = False,
        output: str = "auto",
        model_kwargs: Optional[dict[str, Any]] = None,
    ):
        super().__init__()
        if output not in OUTPUTS:
            raise ConfigError(f"{FIELD}.output", f"{output!r} is not one of {', '.join(OUTPUTS)}")
        timm = import_timm()
        if not timm.is_model(model):
            raise ConfigError(
                f"{FIELD}.model", f"timm has no model {model!r} (see timm.list_models())"
            )
        field = f"{FIELD}.pretrained"
        kwargs: dict[str, Any] = dict(model_kwargs or {}, num_classes=0, in_chans=in_channels)
        weights = None
        if pretrained is True:
            weights = cached_timm_weights(timm, model, field)
        elif pretrained:
            weights = resolve_weights_path(pretrained, field=field, filenames=())
        if weights is not None:
            kwargs.update(
                pretrained=True, pretrained_cfg_overlay={"file": str(weights), "source": ""}
            )
        try:
            with _hub_offline():
                self.model = timm.create_model(model, **kwargs)
        except RuntimeError as error:
            if weights is None:
                raise
            raise DataError(f"{weights}: cannot load into timm model {model!r}: {error}") from error
        except (ValueError, TypeError) as error:
            raise ConfigError(
                f"{FIELD}.model", f"timm cannot build {model!r} with {kwargs}: {error}"
            ) from error
        self.output = output
        self.prefix_tokens = int(getattr(self.model, "num_prefix_tokens", 0))
        self.out_channels = int(self.model.num_features)
        if freeze_bn:
            self.freeze_batchnorm(freeze_bn)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features: torch.Tensor = self.model.forward_features(images)
        if features.dim() == 4:
            if getattr(self.model, "output_fmt", "NCHW") == "NHWC":  # e.g. Swin
                features = features.permute(0, 3, 1, 2)
            return features.flatten(2).transpose(1, 2) if self.output == "tokens" else features
        tokens = features[:, self.prefix_tokens :]
        if self.output != "map":
            return tokens
        grid = (
            self.model.patch_embed.dynamic_feat_size(images.shape[-2:])
            if hasattr(self.model, "patch_embed")
            else None
        )
        if grid is None or grid[0] * grid[1] != tokens.shape[1]:
            raise ValueError(
                f"cannot arrange {tokens.shape[1]} tokens of {type(self.model).__name__} as a map"
            )
        return tokens.transpose(1, 2).reshape(tokens.shape[0], tokens.shape[2], grid[0], grid[1])


@BACKBONES.register("vit")
class ViT(TimmBackbone):
    """A timm Vision Transformer; default ``vit_small_patch16_224`` (ViT-S/16, the SimPool
    backbone). Returns patch tokens ``[B, N, C]`` without the CLS token.

    ``class_token: false`` builds the encoder without a CLS token at all, so the patch tokens never
    attend to one: SimPool's ViT setting (Psomas thesis §3.4.5; the SimPool timm fork builds its ViT with
    ``class_token=False`` and ``global_pool='simpool'``). With ``true`` (timm's default) the CLS
    token takes part in every block and is only dropped from the output.

    Args:
        img_size: the input side in pixels (the patch grid follows).
        class_token: build the encoder with a CLS token (timm's default; dropped from the output) or
            without one (SimPool's setting).
    """

    def __init__(
        self,
        model: str = "vit_small_patch16_224",
        in_channels: int = 3,
        pretrained: PretrainedSpec = False,
        img_size: int = 224,
        output: str = "tokens",
        class_token: bool = True,
        model_kwargs: Optional[dict[str, Any]] = None,
    ):
        kwargs = dict(model_kwargs or {}, img_size=img_size)
        if not class_token:  # timm's pool is unused: features end here
            kwargs.update(class_token=False, global_pool="avg")
        super().__init__(model, in_channels, pretrained, False, output, kwargs)
