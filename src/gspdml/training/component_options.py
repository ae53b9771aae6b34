"""``RUN_DIR/components.json``: every component's options as the run built it, defaults included.

A component's defaults live in its code, so a default changed between a run's start and its
resume would change the model unseen: ``--resume`` compares the recorded options with those
resolved now (:func:`check_same_options`). Options the builder supplies (:data:`SUPPLIED`) are
left out.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gspdml.config import RunConfig
from gspdml.dotted_keys import dotted_keys
from gspdml.errors import ConfigError, read_json_object
from gspdml.losses import LOSSES
from gspdml.losses.base import loss_entries
from gspdml.models.backbones import BACKBONES
from gspdml.output_files import atomic_write_text, json_text
from gspdml.pooling import POOLINGS
from gspdml.registry import Registry, parse_spec

COMPONENTS_FILE = "components.json"
#: arguments the builder passes, never the config
SUPPLIED = frozenset({"in_channels", "embedding_dim", "num_classes", "seed"})


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it (tuples as lists; anything else JSON lacks as its repr)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _resolve(registry: Registry, spec: Any, field: str) -> dict[str, Any]:
    name, given = parse_spec(spec, field)
    nested = getattr(registry.get(name, field), "nested", {})
    options: dict[str, Any] = {}
    for p in registry.options(name):
        if p.name in SUPPLIED:
            continue
        value = given.get(p.name, p.default)
        if value is inspect.Parameter.empty:
            continue
        if p.name in nested and value is not None and not isinstance(value, (int, float)):
            options[p.name] = _resolve(nested[p.name], value, f"{field}.{p.name}")
        else:
            options[p.name] = _plain(value)
    extra = {k: _plain(v) for k, v in given.items() if k not in options}  # **kwargs factories
    return {"name": registry.primary(name), "options": {**options, **extra}}


def resolved_options(config: RunConfig) -> dict[str, Any]:
    """``{field: {"name", "options"}}`` of the run's backbone, pooling and loss(es)."""
    out = {
        "model.backbone": _resolve(BACKBONES, config.model.backbone, "model.backbone"),
        "model.pooling": _resolve(POOLINGS, config.model.pooling, "model.pooling"),
    }
    for spec, _, field in loss_entries(config.loss, "loss"):  # an entry's weight: not an option
        out[field] = _resolve(LOSSES, spec, field)
    return out


def write_options(run_dir: Path, config: RunConfig) -> None:
    text = json_text(resolved_options(config), indent=1, sort_keys=True) + "\n"
    atomic_write_text(Path(run_dir) / COMPONENTS_FILE, text)


def _is_record(value: Any) -> bool:
    """Whether ``value`` is one component's record, ``{"name": ..., "options": {...}}``."""
    return (
        isinstance(value, Mapping)
        and set(value) == {"name", "options"}
        and isinstance(value["options"], Mapping)
    )


def _as_spec(value: Any) -> Any:
    """A component's record as the config spec that sets it, ``{"name": ..., **options}`` (a
    nested component's too), so that a changed option is named by its config key
    (``loss.base.margin``); anything else as it is."""
    if not _is_record(value):
        return value
    return {"name": value["name"], **{k: _as_spec(v) for k, v in value["options"].items()}}


def _without_entry_weight(field: str, value: Any) -> Any:
    """A loss's record without the ``weight`` that ``components.json`` files written before it
    was left out recorded among the options of a loss given in the named form (``{xbm: {base:
    c2, weight: 0.5}}``): the entry's weight in the sum of losses, which no loss takes as an
    option (:func:`gspdml.losses.base.loss_entries`) and the config records."""
    if not (field == "loss" or field.startswith("loss[")) or not _is_record(value):
        return value
    options = {k: v for k, v in value["options"].items() if k != "weight"}
    return {"name": value["name"], "options": options}


def option_keys(record: Mapping[str, Any]) -> dict[str, Any]:
    """``{config key: value}`` of a components record, keyed by
    :func:`gspdml.dotted_keys.dotted_keys` (an empty mapping is a value, a list one value): the
    one naming of a component option, the key a user writes in a config or an override
    (``loss.margin``, ``loss.base.margin``), for ``--resume`` and ``gspdml diff`` alike; a
    record of an earlier version is read as this one writes it (:func:`_without_entry_weight`)."""
    return dotted_keys(
        {field: _as_spec(_without_entry_weight(field, value)) for field, value in record.items()}
    )


def check_same_options(run_dir: Path, config: RunConfig) -> None:
    """Refuse a resume whose components resolve to other options than the run's."""
    path = Path(run_dir) / COMPONENTS_FILE
    if not path.is_file():
        return
    saved, now = option_keys(read_json_object(path)), option_keys(resolved_options(config))
    changed = {
        key: (saved.get(key, "<absent>"), now.get(key, "<absent>"))
        for key in sorted(set(saved) | set(now))
        if saved.get(key, "<absent>") != now.get(key, "<absent>")
    }
    if changed:
        listing = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())
        raise ConfigError(
            "--resume",
            f"the components resolve to other options than when {run_dir} started ({listing}): "
            "a default changed in their code. Set the option in the config to the run's value "
            "to continue it, or start a new run",
        )
