"""The plugin modules a run depends on (``environment.json``'s ``plugins``,
:func:`gspdml.plugins.run_plugins`): those its config's ``plugins`` key names and those that
define a component its config uses, the dataset, backbone, pooling, loss (a wrapper's base loss
too) and post-processing steps. A plugin imported by the process for another run, whose
components this run does not use, is not the run's.

A component defined in a script run as a program (``python train.py``, a notebook) has the
module ``__main__``, which another process cannot import back, and gspdml never runs a script
from a run folder (a received file must not run code). Its record
(:data:`gspdml.plugins.SCRIPT`) lists the script's components, ``{"field", "kind", "name",
"class"}`` (``kind``: the registry's). Training warns once per class that the run reloads only
where that class is importable (:func:`recorded_plugins`), and reading the run back
(``load_run``: ``gspdml evaluate``, ``index``, ``report``) requires each to be registered, under
its recorded class, before it (:func:`require_script_components`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gspdml.config import RunConfig
from gspdml.config.options import component_registries
from gspdml.errors import ConfigError
from gspdml.evaluation.postprocess import parse_steps
from gspdml.plugins import SCRIPT, run_plugins
from gspdml.registry import Registry, parse_spec

LIBRARY = "gspdml"
#: the script classes this process has warned about (:func:`recorded_plugins`): once each
_WARNED: set[str] = set()


#: a component: ``(field, its registry, registered name, constructor)``
Component = tuple[str, Registry, str, Any]


def _factories(registry: Registry, spec: Any, field: str) -> Iterator[Component]:
    """The component ``spec`` names and those of the specs nested in its options."""
    name, options = parse_spec(spec, field)
    factory = registry.get(name, field)
    yield field, registry, registry.primary(name), factory
    for option, nested in getattr(factory, "nested", {}).items():
        value = options.get(option)
        if isinstance(value, (str, Mapping)):
            yield from _factories(nested, value, f"{field}.{option}")


def _components(config: RunConfig) -> list[Component]:
    """Every component ``config`` uses."""
    registries = component_registries()
    losses = config.loss if isinstance(config.loss, list) else [config.loss]
    specs = [
        ("data.dataset", config.data.dataset),
        ("model.backbone", config.model.backbone),
        ("model.pooling", config.model.pooling),
        *(("loss", spec) for spec in losses),  # a list's weight is no nested spec
        *(("evaluation.postprocess", step) for step in parse_steps(config.evaluation.postprocess)),
    ]
    return [c for field, spec in specs for c in _factories(registries[field], spec, field)]


def recorded_plugins(config: RunConfig) -> list[dict[str, Any]]:
    """The records of the plugin modules ``config``'s run depends on (module doc); a script's
    record lists its components, and each script class is warned about once per process."""
    used = _components(config)
    modules = {getattr(f, "__module__", None) or "" for *_, f in used}
    outside = sorted(m for m in modules if m and m.split(".")[0] != LIBRARY)
    records = run_plugins(config.plugins, outside)
    script = [
        {"field": field, "kind": registry.kind, "name": name, "class": factory.__qualname__}
        for field, registry, name, factory in used
        if getattr(factory, "__module__", None) == SCRIPT
    ]
    for record in records:
        if record["module"] == SCRIPT:
            _warn_script(script, record.get("file"))
    return [{**r, "components": script} if r["module"] == SCRIPT else r for r in records]


def _warn_script(components: Sequence[Mapping[str, str]], file: Any) -> None:
    for component in components:
        if component["class"] in _WARNED:
            continue
        _WARNED.add(component["class"])
        warnings.warn(
            f"{component['field']} {component['name']!r} is the class {component['class']} of "
            f"the script {file} (module {SCRIPT}): the run can be read back (gspdml evaluate, "
            f"index, report; load_run) only in a process where that class is importable and "
            f"registered; move it to a module and name that module in the config's plugins key",
            UserWarning,
            stacklevel=2,
        )


def require_script_components(records: Sequence[Mapping[str, Any]], where: str) -> None:
    """Refuse to read back a run whose script components (module doc) this process has not
    registered under their recorded class, naming the component, ``__main__`` and the fix."""
    registries = {registry.kind: registry for registry in component_registries().values()}
    for record in records:
        if record.get("module") != SCRIPT:
            continue
        for component in record.get("components", []):
            field, name, cls = component["field"], component["name"], component["class"]
            registry = registries.get(component["kind"])
            now = registry.get(name) if registry is not None and name in registry else None
            if now is not None and getattr(now, "__qualname__", None) == cls:
                continue
            found = (
                "is not registered in this process"
                if now is None
                else f"is {now.__module__}.{now.__qualname__} in this process"
            )
            raise ConfigError(
                where,
                f"the run's {field} {name!r} is the class {cls} of the script "
                f"{record.get('file')}, recorded as module {SCRIPT!r}, and {found}; gspdml "
                f"never runs a script from a run folder: move {cls} to a module on PYTHONPATH "
                f"and name it in the config's plugins key, or import the module that registers "
                f"it before loading the run",
            )
