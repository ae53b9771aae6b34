"""The plugin modules a run depends on (``environment.json``'s ``plugins``,
:func:`gspdml.plugins.run_plugins`): those its config's ``plugins`` key names and those that
define a component its config uses, the dataset, backbone, pooling, loss (a wrapper's base loss
too) and post-processing steps. A plugin imported by the process for another run, whose
components this run does not use, is not the run's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gspdml.config import RunConfig
from gspdml.config.options import component_registries
from gspdml.evaluation.postprocess import parse_steps
from gspdml.plugins import run_plugins
from gspdml.registry import Registry, parse_spec

LIBRARY = "gspdml"


def _factories(registry: Registry, spec: Any, field: str) -> Iterator[Any]:
    """The constructor ``spec`` names and those of the specs nested in its options."""
    name, options = parse_spec(spec, field)
    factory = registry.get(name, field)
    yield factory
    for option, nested in getattr(factory, "nested", {}).items():
        value = options.get(option)
        if isinstance(value, (str, Mapping)):
            yield from _factories(nested, value, f"{field}.{option}")


def used_factories(config: RunConfig) -> list[Any]:
    """The constructors of every component ``config`` uses."""
    registries = component_registries()
    losses = config.loss if isinstance(config.loss, list) else [config.loss]
    specs = [
        ("data.dataset", config.data.dataset),
        ("model.backbone", config.model.backbone),
        ("model.pooling", config.model.pooling),
        *(("loss", spec) for spec in losses),  # a list's weight is no nested spec
        *(("evaluation.postprocess", step) for step in parse_steps(config.evaluation.postprocess)),
    ]
    return [f for field, spec in specs for f in _factories(registries[field], spec, field)]


def recorded_plugins(config: RunConfig) -> list[dict[str, Any]]:
    """The records of the plugin modules ``config``'s run depends on (module doc)."""
    modules = {getattr(f, "__module__", None) or "" for f in used_factories(config)}
    outside = sorted(m for m in modules if m and m.split(".")[0] != LIBRARY)
    return run_plugins(config.plugins, outside)
