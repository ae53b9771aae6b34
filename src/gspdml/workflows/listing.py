"""What can be named in a run config: the registered components and the shipped presets, each
with the first line of its documentation (``gspdml list``, like timm's ``list_models``)."""

from __future__ import annotations

import fnmatch
import inspect
from typing import Callable, Optional

from gspdml.registry import Registry

#: what ``gspdml list`` can list
KINDS = ("poolings", "losses", "backbones", "datasets", "presets", "metrics")


def _registry(kind: str) -> Registry:
    if kind == "poolings":
        from gspdml.pooling import POOLINGS as registry
    elif kind == "losses":
        from gspdml.losses import LOSSES as registry
    elif kind == "backbones":
        from gspdml.models.backbones import BACKBONES as registry
    else:
        from gspdml.data import DATASETS as registry
    return registry


def _summary(obj: Callable) -> str:
    """The docstring's first paragraph on one line."""
    paragraph = (inspect.getdoc(obj) or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())


def _preset_summary(name: str) -> str:
    from gspdml.config import load_config

    lines = load_config(name).description.strip().splitlines()
    return lines[0] if lines else ""


def listing(kind: str, pattern: Optional[str] = None) -> list[tuple[str, str]]:
    """``[(name, one-line summary)]`` of ``kind`` (one of :data:`KINDS`), sorted, filtered by a
    shell-style ``pattern``; a registered alias reads ``alias of <name>``."""
    from gspdml.errors import ConfigError

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
