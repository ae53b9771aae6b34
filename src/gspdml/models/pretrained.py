"""Pretrained weights: find them on disk, read them, load them into a backbone.

gspdml never downloads weights. ``pretrained: true`` looks in the usual caches
(``$TORCH_HOME/hub/checkpoints``, the Hugging Face cache for timm models), ``pretrained: <path>``
reads that file; a missing file raises one :class:`WeightsNotFoundError` saying which file to put
where. Pre-training recipes reach a backbone as their cached weights (:func:`read_recipe_weights`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import torch
from torch import nn

from gspdml.errors import ConfigError, DataError
from gspdml.models.checkpoint_limits import check_torch_checkpoint

PretrainedSpec = Union[bool, str, os.PathLike[str], None]


class WeightsNotFoundError(ConfigError):
    """Pretrained weights were requested but are not on disk; the message names the file and
    the folder it is expected in."""


def torch_hub_checkpoint_dir() -> Path:
    """``$TORCH_HOME/hub/checkpoints`` (default ``~/.cache/torch/hub/checkpoints``), where
    ``torch.hub.load_state_dict_from_url`` stores downloaded files."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def resolve_weights_path(
    pretrained: PretrainedSpec,
    *,
    field: str,
    filenames: Sequence[str],
    url: Optional[str] = None,
    what: str = "",
) -> Optional[Path]:
    """Turn a ``pretrained`` option into a file path, or ``None`` when it is false.

    ``True`` searches ``filenames`` (the first is the canonical name) in
    :func:`torch_hub_checkpoint_dir`; a string or path must name an existing file."""
    if pretrained is None or pretrained is False:
        return None
    if pretrained is True:
        return hub_checkpoint(field=field, filenames=filenames, url=url, what=what)
    if isinstance(pretrained, (str, os.PathLike)):
        path = Path(pretrained).expanduser()
        if not path.is_file():
            raise WeightsNotFoundError(field, f"weights file {str(path)!r} does not exist")
        return path
    raise ConfigError(field, f"expected true, false or a file path, got {pretrained!r}")


def hub_checkpoint(
    *, field: str, filenames: Sequence[str], url: Optional[str] = None, what: str = ""
) -> Path:
    """The first of ``filenames`` in :func:`torch_hub_checkpoint_dir` (``pretrained: true``)."""
    directory = torch_hub_checkpoint_dir()
    for name in filenames:
        if (directory / name).is_file():
            return directory / name
    source = f" (download it from {url} where there is internet)" if url else ""
    raise WeightsNotFoundError(
        field,
        f"pretrained weights{' for ' + what if what else ''} not found: put {filenames[0]} into "
        f"{directory}{source}, or set {field} to the path of a local weights file",
    )


def read_recipe_weights(weights: Union[str, os.PathLike[str]]) -> dict[str, torch.Tensor]:
    """The state dict in the file of a pre-training recipe's weights (``model.backbone.weights``
    once :func:`gspdml.training.pretrain.resolve_recipe_weights` has replaced the recipe by it)."""
    path = Path(weights)
    if path.suffix != ".safetensors" or not path.is_file():
        raise WeightsNotFoundError(
            "model.backbone.weights",
            f"{str(weights)!r} is not a file of pre-trained weights: a pre-training recipe (a name or a YAML "
            "file) is trained on first use and replaced by the file of its weights by "
            "gspdml.training.pretrain.resolve_recipe_weights, as the trainer does",
        )
    return read_state_dict(path)


class SavedArguments:
    """What a training script's pickled ``argparse.Namespace`` is read back as: its attributes,
    set by the unpickler from the stored ``__dict__``; no code of the file runs."""


def read_state_dict(
    path: Union[str, os.PathLike[str]], wrappers: Sequence[str] = ("state_dict", "model")
) -> dict[str, torch.Tensor]:
    """Read a checkpoint (``.safetensors`` or a torch pickle) as a flat ``{key: tensor}`` dict.

    A pickle is first checked for the memory it asks for
    (:func:`gspdml.models.checkpoint_limits.check_torch_checkpoint`), then read with
    ``torch.load(weights_only=True)``, so a pickle that would run code is refused (a
    :class:`DataError`). The one class allowed besides is ``argparse.Namespace`` (the ``args``
    training scripts store), rebuilt as a plain :class:`SavedArguments`. The weights are unwrapped
    by the first of ``wrappers`` the file holds, and a ``DataParallel`` ``module.`` prefix is removed.
    """
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state: Any = load_file(str(path))
        else:
            check_torch_checkpoint(path)  # the memory it asks for, before anything is inflated
            with torch.serialization.safe_globals([(SavedArguments, "argparse.Namespace")]):
                state = torch.load(path, map_location="cpu", weights_only=True)
    except DataError:
        raise
    except Exception as error:  # noqa: BLE001 - any reader failure is a bad file
        raise DataError(f"{path}: cannot read weights ({type(error).__name__}: {error})") from error
    for wrapper in wrappers:
        if isinstance(state, Mapping) and isinstance(state.get(wrapper), Mapping):
            state = state[wrapper]
    if not isinstance(state, Mapping):
        raise DataError(
            f"{path}: expected a mapping of parameter names to tensors, got {type(state).__name__}"
        )
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise DataError(
                f"{path}: expected a mapping of parameter names (strings) to tensors; entry "
                f"{str(key)[:60]!r} is a {type(key).__name__} -> {type(value).__name__}"
            )
    return {(k[len("module.") :] if k.startswith("module.") else k): v for k, v in state.items()}


def load_weights(
    module: nn.Module,
    state: Mapping[str, torch.Tensor],
    *,
    source: str,
    ignore_prefixes: Iterable[str] = (),
) -> None:
    """Copy ``state`` into ``module``, requiring every tensor of the module to be present.

    Keys starting with one of ``ignore_prefixes`` (e.g. a ResNet's ``fc.``) are skipped; a tensor
    with extra leading singleton axes is reshaped (the Caffe-converted BN-Inception stores BatchNorm
    vectors as ``[1, C]``). Anything else that does not fit raises a
    :class:`~gspdml.errors.DataError` naming ``source`` and the first offending keys."""
    ignore = tuple(ignore_prefixes)
    target = module.state_dict()
    adapted: dict[str, torch.Tensor] = {}
    unexpected, mismatched = [], []
    for key, value in state.items():
        if ignore and key.startswith(ignore):
            continue
        if key not in target:
            unexpected.append(key)
            continue
        want = target[key].shape
        if value.shape != want:
            if _drops_leading_ones(value.shape, want):
                value = value.reshape(want)
            else:
                mismatched.append(f"{key} {tuple(value.shape)} vs {tuple(want)}")
                continue
        adapted[key] = value
    missing = [k for k in target if k not in adapted and not k.endswith("num_batches_tracked")]
    problems = []
    if missing:
        problems.append(f"missing {len(missing)} keys (e.g. {', '.join(missing[:3])})")
    if unexpected:
        problems.append(f"unexpected {len(unexpected)} keys (e.g. {', '.join(unexpected[:3])})")
    if mismatched:
        problems.append(
            f"shape mismatch for {len(mismatched)} keys (e.g. {'; '.join(mismatched[:3])})"
        )
    if problems:
        raise DataError(
            f"{source}: weights do not fit {type(module).__name__}: " + "; ".join(problems)
        )
    module.load_state_dict(adapted, strict=False)


def _drops_leading_ones(stored: torch.Size, wanted: torch.Size) -> bool:
    """True when ``stored`` is ``wanted`` with extra leading size-1 axes (``[1, C]`` vs ``[C]``)."""
    extra = len(stored) - len(wanted)
    return (
        extra > 0 and all(s == 1 for s in stored[:extra]) and tuple(stored[extra:]) == tuple(wanted)
    )
