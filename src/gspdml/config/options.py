"""The options of a registered component, each declared in one place: the constructor's
signature gives its type (the annotation, :mod:`gspdml.typecheck`) and default, the ``Args:``
section of a docstring gives its meaning.

An option's documentation is looked up in the docstrings of the constructor: a class's own and
its ``__init__``'s, then its bases' (a wrapper's ``base``, a backbone family's ``pretrained``),
and the callables a factory names with :func:`gspdml.registry.documented_by` (options that a
family of readers shares are documented once). An ``Args:`` entry is ``name: meaning`` (or
``a, b: meaning`` for several), continued on more indented lines. ``docs/configuration.md``
(:mod:`gspdml.config.reference`) and ``gspdml list KIND --options`` read :func:`component_options`;
a test fails for an option without a meaning.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gspdml.output_files import json_text
from gspdml.registry import Registry
from gspdml.settings.schema import plain
from gspdml.typecheck import describe, option_types

#: the headings that open a docstring's section of arguments
ARGS_HEADINGS = ("Args:", "Arguments:", "Parameters:", "Options:")
_ENTRY = re.compile(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:\([^)]*\))?:(?:\s+(.*))?$")


@dataclasses.dataclass(frozen=True)
class ComponentOption:
    """One option of a component: ``kind`` is its type in words, ``default`` its YAML form or
    ``required``, ``doc`` its meaning ("" when no docstring gives one)."""

    name: str
    kind: str
    default: str
    doc: str


def args_section(doc: str) -> dict[str, str]:
    """``{argument: meaning}`` of the ``Args:`` sections of a (cleaned) docstring."""
    found: dict[str, str] = {}
    indent: int | None = None
    current: list[str] = []
    for line in doc.splitlines():
        text = line.strip()
        if text in ARGS_HEADINGS:
            indent, current = -1, []
            continue
        if indent is None or not text:
            continue
        depth = len(line) - len(line.lstrip())
        if indent == -1:
            indent = depth
        entry = _ENTRY.match(text) if depth == indent else None
        if entry:
            current = [name.strip() for name in entry.group(1).split(",")]
            for name in current:
                found.setdefault(name, entry.group(2) or "")
        elif depth > indent and current:
            for name in current:
                found[name] = f"{found[name]} {text}".strip()
        else:
            indent, current = None, []
    return found


def _docstrings(factory: Callable[..., Any]) -> Iterator[str]:
    owners = inspect.getmro(factory) if inspect.isclass(factory) else (factory,)
    packages = {"gspdml", _package(factory)}
    for owner in owners:
        if _package(owner) not in packages:
            continue  # the library's and the plugin's own classes, not torch.nn.Module

        yield inspect.cleandoc(owner.__doc__ or "")
        init = vars(owner).get("__init__") if inspect.isclass(owner) else None
        if init is not None:
            yield inspect.cleandoc(init.__doc__ or "")
    for other in getattr(factory, "documented_by", ()):
        yield from _docstrings(other)


def _package(obj: Any) -> str:
    return (getattr(obj, "__module__", None) or "").split(".")[0]


def option_docs(factory: Callable[..., Any]) -> dict[str, str]:
    """``{option: meaning}`` from every docstring that documents ``factory`` (the first wins)."""
    docs: dict[str, str] = {}
    for doc in _docstrings(factory):
        for name, meaning in args_section(doc).items():
            if meaning:
                docs.setdefault(name, meaning)
    return docs


def _default(param: inspect.Parameter) -> str:
    if param.default is inspect.Parameter.empty:
        return "required"
    try:
        return json_text(plain(param.default))
    except TypeError:
        return repr(param.default)


def component_options(registry: Registry, name: str) -> list[ComponentOption]:
    """The options of ``registry``'s entry ``name``, in the constructor's order."""
    factory = registry.get(name)
    types = option_types(factory)
    docs = option_docs(factory)
    nested: dict[str, Registry] = getattr(factory, "nested", {})
    kinds = {arg: f"a {inner.kind} spec" for arg, inner in nested.items()}
    kinds.update({arg: describe(hint) for arg, hint in types.items() if arg not in kinds})
    shown: Mapping[str, str] = getattr(factory, "config_names", {})  # a field named otherwise
    return [
        ComponentOption(
            name=shown.get(param.name, param.name),
            kind=kinds.get(param.name, "any"),
            default=_default(param),
            doc=docs.get(param.name) or docs.get(shown.get(param.name, ""), ""),
        )
        for param in registry.options(name)
    ]


def component_registries() -> dict[str, Registry]:
    """Every registry a run config names components from, by the config field that names them
    (the packages register on import)."""
    from gspdml.data import DATASETS
    from gspdml.evaluation.postprocess import POSTPROCESSORS
    from gspdml.losses import LOSSES
    from gspdml.models.backbones import BACKBONES
    from gspdml.pooling import POOLINGS

    return {
        "data.dataset": DATASETS,
        "model.backbone": BACKBONES,
        "model.pooling": POOLINGS,
        "loss": LOSSES,
        "evaluation.postprocess": POSTPROCESSORS,
    }
