"""A frozen vision–language model behind one small interface, and safe weight loading.

FreeDom and WeiCom need only an image encoder f and a text encoder g with ℓ2-normalised outputs
(Psomas thesis §4.3.1, §5.3.2: "All embeddings are ℓ2-normalized"). Any model satisfying
:class:`VisionLanguageEncoder` works; :class:`VisionLanguageModel` builds one from a module's
raw encoders plus its tokenizer and image preprocessing (open_clip, transformers and a user's
own model are adapted in :mod:`gspdml.cir.backends`).

Weights are read by :func:`load_weights` as backbone weights are
(:func:`gspdml.models.pretrained.read_state_dict`: safetensors, or ``torch.load(weights_only=True)``
so that no code in the file runs; ``state_dict``/``model`` nesting and ``module.`` prefixes, as
in the RemoteCLIP checkpoints, unwrapped).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Protocol, Union, runtime_checkable

import torch
from PIL import Image

from gspdml.errors import DataError, GspdmlError
from gspdml.models.pretrained import read_state_dict

Tokens = Union[torch.Tensor, Mapping[str, torch.Tensor]]


class WeightsUnavailableError(GspdmlError):
    """Pretrained weights are neither a local file nor in the local cache (no download is tried)."""


class OptionalDependencyError(GspdmlError, ImportError):
    """An optional library (open_clip, transformers) is needed for the requested model."""


def require(module: str, extra: str, package: str) -> ModuleType:
    """Import an optional library or raise one error naming the pip extra that provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except Exception as error:  # a missing package, or an installed one that fails to import
        raise OptionalDependencyError(
            f"this model needs the optional package {package!r} ({module} failed to import: {type(error).__name__}: {error}); "
            f"install it with: pip install 'gspdml[{extra}]'  (or pip install {package})"
        ) from None


@runtime_checkable
class VisionLanguageEncoder(Protocol):
    """What the composed-retrieval methods need from a model."""

    model_id: str

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        """An RGB image to the model's input tensor ``[C, H, W]``."""

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Preprocessed images ``[N, C, H, W]`` to ℓ2-normalised embeddings ``[N, D]``."""

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Strings to ℓ2-normalised embeddings ``[N, D]``."""


class VisionLanguageModel:
    """:class:`VisionLanguageEncoder` from raw encoders.

    ``image_encoder(pixels [N, C, H, W]) -> [N, D]`` and ``text_encoder(tokens) -> [N, D]`` are the
    model's own (unnormalised) projections; ``tokenize(list[str])`` returns a token tensor or a
    dict of tensors (passed as keyword arguments); ``preprocess(PIL image) -> [C, H, W]``.
    Outputs are float32, ℓ2-normalised, on the CPU; encoders run without gradients, with
    ``module`` (if given) in eval mode on ``device``.
    """

    def __init__(
        self,
        image_encoder: Callable[..., torch.Tensor],
        text_encoder: Callable[..., torch.Tensor],
        tokenize: Callable[[list[str]], Tokens],
        preprocess: Callable[[Image.Image], torch.Tensor],
        model_id: str,
        module: Optional[torch.nn.Module] = None,
        device: str | torch.device = "cpu",
    ):
        self.image_encoder, self.text_encoder = image_encoder, text_encoder
        self.tokenize, self._preprocess = tokenize, preprocess
        self.model_id, self.module, self.device = str(model_id), module, torch.device(device)
        if module is not None:
            module.to(self.device).eval()

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        return self._preprocess(image)

    @torch.no_grad()
    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        if images.ndim != 4:
            raise DataError(
                f"{self.model_id}: encode_image expects preprocessed images [N, C, H, W], got shape {tuple(images.shape)}"
            )
        return _normalized(self.image_encoder(images.to(self.device)))

    @torch.no_grad()
    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        if isinstance(texts, str):
            raise DataError(
                f"{self.model_id}: encode_text expects a list of strings, got a single string {texts!r}"
            )
        tokens = self.tokenize(list(texts))
        if isinstance(tokens, Mapping):
            return _normalized(
                self.text_encoder(**{k: v.to(self.device) for k, v in tokens.items()})
            )
        return _normalized(self.text_encoder(tokens.to(self.device)))

    def __repr__(self) -> str:
        return f"VisionLanguageModel({self.model_id!r}, device={self.device})"


def _normalized(features: Any) -> torch.Tensor:
    if not isinstance(features, torch.Tensor):  # e.g. a transformers output object
        features = features.pooler_output
    return torch.nn.functional.normalize(features.float(), dim=-1).cpu()


def load_weights(module: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """Load ``path`` into ``module`` strictly; a mismatch names the file and the differing keys."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"weights file not found: {path}")
    state = read_state_dict(path)
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    wrong = sorted(k for k in set(own) & set(state) if own[k].shape != state[k].shape)
    if missing or unexpected or wrong:

        def some(keys: list[str]) -> str:
            return ", ".join(keys[:5]) + (f" (+{len(keys) - 5} more)" if len(keys) > 5 else "")

        found = {"missing": missing, "unexpected": unexpected, "wrong shape": wrong}
        problems = [f"{label}: {some(keys)}" for label, keys in found.items() if keys]
        raise DataError(
            f"{path}: weights do not fit {type(module).__name__}; " + "; ".join(problems)
        )
    module.load_state_dict(state)
    return module
