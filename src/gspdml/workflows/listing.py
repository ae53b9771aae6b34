"""What can be named in a run config: the registered components and the shipped presets, each
with the first line of its documentation (``gspdml list``, like timm's ``list_models``), and a
component's options with their type, default and meaning (``--options``,
:mod:`gspdml.config.options`)."""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Callable
from typing import Any, Optional

from gspdml.config.options import ComponentOption, component_options, component_registries
from gspdml.errors import ConfigError
from gspdml.registry import Registry

#: the kinds of ``gspdml list`` that are registries, by the config field that names them
COMPONENT_KINDS = {
    "poolings": "model.pooling",
    "losses": "loss",
    "backbones": "model.backbone",
    "datasets": "data.dataset",
    "postprocessors": "evaluation.postprocess",
}
#: what ``gspdml list`` can list
KINDS = (*COMPONENT_KINDS, "presets", "metrics")


def _registry(kind: str) -> Registry:
    return component_registries()[COMPONENT_KINDS[kind]]


def _summary(obj: Callable[..., Any]) -> str:
    """The docstring's first paragraph on one line."""
    paragraph = (inspect.getdoc(obj) or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())


def _preset_summary(name: str) -> str:
    """The first line of the preset's ``description`` (its own or its bases'), read without
    checking the preset: a listing needs its name and description only (``gspdml config NAME``
    and ``train`` check it)."""
    from gspdml.config.loading import read_config

    description = read_config(name, {}).get("description") or ""
    lines = str(description).strip().splitlines()
    return lines[0] if lines else ""


def listing(kind: str, pattern: Optional[str] = None) -> list[tuple[str, str]]:
    """``[(name, one-line summary)]`` of ``kind`` (one of :data:`KINDS`), sorted, filtered by a
    shell-style ``pattern``; a registered alias reads ``alias of <name>``."""
    if kind not in KINDS:
        raise ConfigError("kind", f"unknown kind {kind!r}; allowed: {', '.join(KINDS)}")
    if kind == "metrics":
        return [(name, summary) for name, summary in _metrics() if _matches(name, pattern)]
    if kind == "presets":
        from gspdml.config import preset_names

        return [(name, _preset_summary(name)) for name in preset_names() if _matches(name, pattern)]
    registry = _registry(kind)
    return [
        (
            name,
            _summary(registry.get(name))
            if registry.primary(name) == name
            else f"alias of {registry.primary(name)}",
        )
        for name in registry.names()
        if _matches(name, pattern)
    ]


def option_listing(
    kind: str, pattern: Optional[str] = None
) -> list[tuple[str, str, list[ComponentOption]]]:
    """``[(name, summary, options)]`` of the components of ``kind`` (one of
    :data:`COMPONENT_KINDS`); an alias has no options of its own (its summary names the entry)."""
    if kind not in COMPONENT_KINDS:
        raise ConfigError(
            "kind", f"--options lists the options of {', '.join(COMPONENT_KINDS)}, not {kind}"
        )
    registry = _registry(kind)
    return [
        (name, summary, component_options(registry, name) if registry.primary(name) == name else [])
        for name, summary in listing(kind, pattern)
    ]


def _metrics() -> list[tuple[str, str]]:
    """Every registered evaluation metric with its depth (bounded, per-k, whole ranking; or
    clustering, derived), its cost class, whether the default report computes it, and the first
    line of its definition."""
    from gspdml.evaluation.metric_registry import METRICS

    rows = []
    for name, metric in sorted(METRICS.items()):
        computed = "default" if metric.default else "when named"
        if metric.kind != "query":
            computed = "when named or selected"
        doc = _summary(metric.score)
        line = f"{metric.depth_class}; cost: {metric.cost_class}; {computed}"
        rows.append((name, f"{line}. {doc}" if doc else line))
    return rows


def _matches(name: str, pattern: Optional[str]) -> bool:
    return pattern is None or fnmatch.fnmatch(name, pattern)
