"""``docs/configuration.md``, generated from the run schema (:mod:`gspdml.settings.sections`)
and from every registered component's options (:mod:`gspdml.config.options`: the constructor's
signature and the ``Args:`` of its docstrings).

``python -m gspdml.config.reference > docs/configuration.md`` rewrites it; a test fails when the
file and the schema or a component disagree.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

from gspdml.config.options import component_options, component_registries
from gspdml.settings.schema import Section, describe_field, section_type
from gspdml.settings.sections import RunConfig

HEADER = """# Run configuration

Every key of a run config, with its type, default and meaning. A run config is one YAML file (or
a preset: `gspdml list presets`); `base:` includes other files, and `gspdml train CONFIG key.sub=value`
overrides any key (an entry of a list by its position: `loss[1].margin=0.2`, the key `gspdml diff`
and `--resume` print). `gspdml config CONFIG` prints the resolved config. Component specs
(`data.dataset`, `model.backbone`, `model.pooling`, `loss`) are `{name: ..., options}`; their
options are the component's constructor arguments, listed under [Components](#components)
(`gspdml list datasets|backbones|poolings|losses --options`).

This page is generated from `src/gspdml/settings/sections.py` and the components' constructors
and docstrings by `python -m gspdml.config.reference`; do not edit it by hand.
"""


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if isinstance(value, Section):
        return "(below)"
    return "`" + json.dumps(_plain(value)) + "`"


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _rows(
    section: type[Section], where: str, out: list[str], nested: list[tuple[type[Section], str]]
) -> None:
    hints = typing.get_type_hints(section)
    for field in dataclasses.fields(section):
        key = f"{where}.{field.name}" if where else field.name
        sub = section_type(hints[field.name])
        if sub is not None:
            nested.append((sub, key))
            kind = "a section" + (" or null" if field.default is None else "")
        else:
            kind = describe_field(hints[field.name], field.metadata)
        out.append(f"| `{key}` | {kind} | {_default(field)} | {field.metadata['doc']} |")


def _component_rows() -> list[str]:
    """One table per registered component: its options with type, default and meaning."""
    lines = [
        "## Components",
        "",
        "The options of every registered component, in the spec that names it "
        "(`loss: {name: zsr, mixing: 0.1}`). Arguments the run supplies (`in_channels`, "
        "`embedding_dim`, `num_classes`, `seed`) are no options.",
        "",
    ]
    for field, registry in component_registries().items():
        for name in registry.registered_from("gspdml"):
            aliases = [a for a in registry.names() if a != name and registry.primary(a) == name]
            lines.append(f"### `{field}: {name}`")
            lines.append("")
            if aliases:
                lines += ["Also named " + ", ".join(f"`{a}`" for a in aliases) + ".", ""]
            options = component_options(registry, name)
            if not options:
                lines += ["No options.", ""]
                continue
            lines += ["| option | type | default | meaning |", "|---|---|---|---|"]
            for option in options:
                default = option.default if option.default == "required" else f"`{option.default}`"
                doc = option.doc.replace("|", "\\|")
                lines.append(f"| `{field}.{option.name}` | {option.kind} | {default} | {doc} |")
            lines.append("")
    return lines


def render() -> str:
    lines = [HEADER]
    queue: list[tuple[type[Section], str]] = [(RunConfig, "")]
    while queue:
        section, where = queue.pop(0)
        nested: list[tuple[type[Section], str]] = []
        lines += [
            f"## `{where}`" if where else "## top level",
            "",
            "| key | type | default | meaning |",
            "|---|---|---|---|",
        ]
        _rows(section, where, lines, nested)
        lines.append("")
        queue += nested
    lines += _component_rows()
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
