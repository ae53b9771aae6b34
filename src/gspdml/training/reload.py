"""What reloads a run's model: ``config.model``, or the factory ``model.factory`` names.

A model the ``model`` section does not describe (a user's ``nn.Module``) must name a factory,
``model.factory: "my_package.models:make_model"``: a function of no arguments returning the model
as given to the trainer (its ``state_dict`` layout is checked before step 1); without one the
trainer refuses the model, so a run is never saved under a config that does not reload it. For
the same reason a factory in the running script (``"__main__:make_model"``) is refused: in the
process that reads the run back, ``__main__`` is another program.
"""

from __future__ import annotations

import importlib
from typing import Any

from torch import nn

from gspdml.config import RunConfig
from gspdml.errors import ConfigError
from gspdml.models import Embedder

FIELD = "model.factory"


def factory_model(path: str) -> nn.Module:
    """The model ``path`` (``"module:function"``) returns."""
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ConfigError(FIELD, f"expected 'module:function', got {path!r}")
    if module == "__main__":  # in another process, __main__ is that process's own program
        raise ConfigError(
            FIELD,
            f"{path!r} is a function of the program being run (module '__main__'), which "
            f"another process (gspdml evaluate, index, report; load_run) cannot import back; "
            f"move {name} to a module on PYTHONPATH and name it as 'my_module:{name}'",
        )
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(FIELD, f"cannot import {path!r}: {exc}") from None
    try:
        model = function()
    except Exception as exc:
        raise ConfigError(FIELD, f"{path!r} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise ConfigError(FIELD, f"{path!r} returned a {type(model).__name__}, not an nn.Module")
    return model


def _layout(model: nn.Module) -> dict[str, tuple[int, ...]]:
    return {key: tuple(value.shape) for key, value in model.state_dict().items()}


def check_reloadable(model: nn.Module, config: RunConfig) -> None:
    """Refuse a model that neither ``config.model`` nor ``model.factory`` rebuilds (module doc)."""
    factory: Any = config.model.factory
    if factory is not None:
        rebuilt = _layout(factory_model(str(factory)))
        trained = _layout(model)
        if rebuilt != trained:
            differ = sorted(set(rebuilt) ^ set(trained)) or [
                key for key in trained if rebuilt[key] != trained[key]
            ]
            raise ConfigError(
                FIELD,
                f"{factory!r} returns a model whose parameters differ from the trained one's "
                f"(e.g. {', '.join(differ[:3])}); it must return the model given to the trainer",
            )
        return
    if not isinstance(model, Embedder):
        raise ConfigError(
            "model",
            f"the trainer got a {type(model).__name__}, which the config's model section "
            f"(backbone {config.model.backbone_name!r}, pooling "
            f"{config.model.pooling_name!r}) does not describe, so the run could not be "
            "reloaded; set model.factory: 'module:function' (a function that returns this model) "
            "or train the Embedder that build_run(config) builds",
        )
