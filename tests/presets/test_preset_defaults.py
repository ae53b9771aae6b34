"""A preset states what differs from the defaults it builds on: a setting or a component option
set to the value it would have anyway (the schema's or the constructor's default, or what the
preset's ``base`` files set)
is noise that hides what the recipe changes, unless its line says the paper pins it
(``# pinned: <source>``, kept so the recipe reads whole). The values themselves are held to
their sources by ``test_preset_recipes.py``."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from gspdml.config import DEFAULTS, PRESETS_DIR
from gspdml.config.loading import (
    SPEC_FIELDS,
    _read_with_bases,
    canonicalise_specs,
    merge,
    parse_yaml,
)
from gspdml.config.options import component_registries
from gspdml.registry import Registry, parse_spec

MARK = "pinned"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _restated(
    registry: Registry, spec: Any, inherited: Any, where: str
) -> Iterator[tuple[str, Any]]:
    """``(option, value)`` of ``spec`` equal to what it inherits (its base files' or the default)."""
    name, options = parse_spec(spec, where)
    if not isinstance(inherited, dict) or inherited.get("name", name) != name:
        inherited = {}
    if name not in registry:
        return
    factory = registry.get(name)
    nested = getattr(factory, "nested", {})
    defaults = {
        p.name: p.default
        for p in registry.options(name)
        if p.default is not inspect.Parameter.empty
    }
    for key, value in options.items():
        if key in nested and isinstance(value, (str, dict)):
            yield from _restated(nested[key], value, inherited.get(key), f"{where}.{key}")
        elif key in inherited or key in defaults:
            if _same(value, inherited.get(key, defaults.get(key))):
                yield key, value


def _restated_settings(node: dict, above: dict, where: str) -> Iterator[tuple[str, Any]]:
    """``(key, value)`` of the run settings (outside component specs) equal to what they inherit."""
    for key, value in node.items():
        field = f"{where}.{key}" if where else key
        if field in SPEC_FIELDS:
            continue
        if isinstance(value, dict) and isinstance(above.get(key), dict):
            yield from _restated_settings(value, above[key], field)
        elif key in above and _same(value, above[key]):
            yield key, value


def restatements(path: Path) -> list[tuple[str, Any]]:
    """The settings and component options ``path`` restates, as ``(key, value)``."""
    data = parse_yaml(path.read_text()) or {}
    bases = data.pop("base", None) or []
    canonicalise_specs(data, partial=True)
    inherited: dict[str, Any] = {}
    for base in [bases] if isinstance(bases, str) else bases:
        local = path.parent / base
        inherited = merge(inherited, _read_with_bases(local if local.is_file() else base, ()))
    registries = component_registries()
    found = list(_restated_settings(data, merge(copy.deepcopy(DEFAULTS), inherited), ""))
    for field in SPEC_FIELDS:
        section, _, key = field.rpartition(".")
        node = data.get(section) if section else data
        above = inherited.get(section, {}) if section else inherited
        if not isinstance(node, dict) or key not in node:
            continue
        spec, before = node[key], above.get(key) if isinstance(above, dict) else None
        specs = spec if isinstance(spec, list) else [spec]
        for i, one in enumerate(specs):
            if isinstance(one, dict):
                one = {k: v for k, v in one.items() if k != "weight"}
                if "name" not in one and isinstance(before, dict):
                    one = {"name": before["name"], **one}
            where = f"{field}[{i}]" if isinstance(spec, list) else field
            found += _restated(registries[field], one, None if len(specs) > 1 else before, where)
    return found


def _scalar(node: yaml.ScalarNode) -> Any:
    return parse_yaml(f"v: {node.value}")["v"] if node.style is None else node.value


def _lines(text: str) -> list[tuple[str, Any, int]]:
    """``(key, value, line number)`` of every entry of a YAML text whose value is a scalar or a
    list of scalars."""
    out: list[tuple[str, Any, int]] = []
    stack = [yaml.compose(text)]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(value, yaml.ScalarNode):
                    out.append((key.value, _scalar(value), key.start_mark.line))
                elif isinstance(value, yaml.SequenceNode) and all(
                    isinstance(item, yaml.ScalarNode) for item in value.value
                ):
                    out.append((key.value, [_scalar(i) for i in value.value], key.start_mark.line))
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return out


def unmarked_restatements(path: Path) -> list[str]:
    """``file:line: option: value`` of each restated option whose line is not marked pinned."""
    text = path.read_text()
    lines, entries = text.splitlines(), _lines(text)
    label = path.relative_to(PRESETS_DIR) if path.is_relative_to(PRESETS_DIR) else path.name
    out = []
    for option, value in restatements(path):
        out += [
            f"{label}:{n + 1}: {option}: {value!r}"
            for key, written, n in entries
            if key == option
            and _same(written, value)
            and ("#" not in lines[n] or MARK not in lines[n].split("#", 1)[1])
        ]
    return sorted(set(out))


def test_no_preset_restates_a_default_unless_pinned():
    offending = [
        line for path in sorted(PRESETS_DIR.rglob("*.yaml")) for line in unmarked_restatements(path)
    ]
    assert not offending, (
        "preset options set to the value they have anyway (drop them, or mark the line "
        "'# pinned: <source>'):\n" + "\n".join(offending)
    )


def test_a_restated_default_is_found(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(
        "seed: 0\nloss:\n  name: zsr\n  mixing: 0.2\n  logit_scale: 9.5\n"
        "  ridge: 0.05  # pinned: GSP paper §4.3\n  base: {c2: {pos_margin: 0.0}}\n"
    )
    assert restatements(preset) == [
        ("seed", 0),
        ("logit_scale", 9.5),
        ("ridge", 0.05),
        ("pos_margin", 0.0),
    ]
    assert unmarked_restatements(preset) == [
        "p.yaml:1: seed: 0",
        "p.yaml:5: logit_scale: 9.5",
        "p.yaml:7: pos_margin: 0.0",
    ]
