"""The machinery of the run schema: a section is a frozen dataclass whose fields carry their
type (the annotation), default, meaning and range, built from a YAML mapping by checking every
key against them.

:func:`option` declares a field: its default (:data:`REQUIRED`: the key must be given), its
one-line documentation (the source of ``docs/configuration.md``), a ``minimum`` (``exclusive``:
strict) and a strict ``below`` bound (an :class:`~gspdml.typecheck.Interval`), a ``noun`` for
the "unknown <noun> 'x'; allowed: ..." message of a closed set, and an optional
``check(value, field)`` for a rule the type cannot say. :meth:`Section.from_mapping` refuses
unknown keys, checks each value, stores lists as tuples and integers as floats in number fields,
then runs the section's cross-field rules (:meth:`Section.check`).

A section also reads as the mapping it was built from (``config["data"]["halves"]`` is
``config.data.halves``); :meth:`Section.to_dict` gives the plain YAML form back.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, Optional, TypeVar, Union

from gspdml.errors import ConfigError, did_you_mean
from gspdml.typecheck import Interval, check_value, describe

#: the default of a field that has none: the key must be given
REQUIRED = dataclasses.MISSING

_SectionT = TypeVar("_SectionT", bound="Section")


def option(
    default: Any,
    doc: str,
    *,
    minimum: Optional[float] = None,
    exclusive: bool = False,
    below: Optional[float] = None,
    noun: str = "value",
    check: Optional[Callable[[Any, str], None]] = None,
    canonical: Optional[Callable[[Any, str], Any]] = None,
) -> Any:
    """A schema field (see the module docstring); a mutable default is copied per instance.
    ``canonical`` maps a value in any accepted form to the stored one before it is checked."""
    interval = None
    if minimum is not None:
        high = math.inf if below is None else below
        interval = Interval(minimum, high, low_open=exclusive, high_open=True)
    meta = {"canonical": canonical, "doc": doc, "interval": interval, "noun": noun, "check": check}
    if default is REQUIRED:
        return dataclasses.field(metadata=meta)
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: _copy(default), metadata=meta)
    if isinstance(default, type) and issubclass(default, Section):
        return dataclasses.field(default_factory=default, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)


def join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


@dataclasses.dataclass(frozen=True)
class Section(Mapping[str, Any]):
    """A frozen, checked group of options (see the module docstring)."""

    @classmethod
    def from_mapping(cls: type[_SectionT], values: Any, where: str) -> _SectionT:
        if not isinstance(values, Mapping):
            raise ConfigError(where, f"expected a mapping of options, got {values!r}")
        names = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in names:
                raise ConfigError(
                    join(where, str(key)),
                    f"unknown key{did_you_mean(key, names)}; allowed: {', '.join(names)}",
                )
        hints = field_types(cls)
        kwargs = {
            f.name: convert(values[f.name], hints[f.name], f, join(where, f.name))
            for f in dataclasses.fields(cls)
            if f.name in values
        }
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is REQUIRED and f.default_factory is REQUIRED and f.name not in values
        ]
        if missing:
            raise ConfigError(
                where, f"missing {', '.join(missing)} (given: {', '.join(values) or 'nothing'})"
            )
        section = cls(**kwargs)
        section.check(where)
        return section

    def check(self, where: str) -> None:
        """Rules between fields of this section (none by default)."""

    def to_dict(self) -> dict[str, Any]:
        """The plain YAML form: nested sections as mappings, tuples as lists."""
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    # the read-only mapping view
    def __getitem__(self, key: str) -> Any:
        if key in self._names():
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self))


@functools.cache
def field_types(cls: type[Section]) -> Mapping[str, Any]:
    """The type of each field of ``cls`` (its annotations, resolved), read once per class:
    ``typing.get_type_hints`` evaluates every string annotation of the class and its bases
    again at each call, a fifth of the time of checking a config from scratch."""
    return types.MappingProxyType(typing.get_type_hints(cls))


def plain(value: Any) -> Any:
    """``value`` in the YAML form: sections as mappings, tuples as lists, at any depth."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def tagged(
    values: Any, tag: str, kinds: Mapping[Any, type[_SectionT]], other: type[_SectionT], where: str
) -> _SectionT:
    """The section of the kind that the value of ``tag`` in ``values`` names (``other`` for any
    other value): a section whose fields depend on one of its values."""
    kind = kinds.get(values.get(tag), other) if isinstance(values, Mapping) else other
    return kind.from_mapping(values, where)


def section_type(hint: Any) -> Optional[type[Section]]:
    """The section class a field holds (``Optional[Plateau]`` -> ``Plateau``), or None."""
    arms = typing.get_args(hint) if typing.get_origin(hint) is Union else (hint,)
    for arm in arms:
        if isinstance(arm, type) and issubclass(arm, Section):
            return arm
    return None


def nullable(hint: Any) -> bool:
    return typing.get_origin(hint) is Union and type(None) in typing.get_args(hint)


def convert(value: Any, hint: Any, spec: dataclasses.Field[Any], field: str) -> Any:
    """``value`` checked against the field's type, range and rule, in its stored form."""
    if value is None and nullable(hint):
        return None
    nested = section_type(hint)
    if nested is not None:
        return nested.from_mapping(value, field)
    meta = spec.metadata
    if meta.get("canonical") is not None:
        value = meta["canonical"](value, field)
    if not check_value(value, hint):
        if typing.get_origin(hint) is Literal and value is not None:
            allowed = ", ".join(str(a) for a in typing.get_args(hint))
            raise ConfigError(field, f"unknown {meta['noun']} {value!r}; allowed: {allowed}")
        raise ConfigError(field, f"expected {describe_field(hint, meta)}, got {value!r}")
    items = value if isinstance(value, (list, tuple)) else [value]
    if meta["interval"] is not None and not all(meta["interval"].admits(x) for x in items):
        raise ConfigError(field, f"expected {describe_field(hint, meta)}, got {value!r}")
    if meta["check"] is not None:
        meta["check"](value, field)
    return _stored(value, hint)


def _stored(value: Any, hint: Any) -> Any:
    """Tuples for sequences (immutable), floats for number fields given as integers."""
    arms = typing.get_args(hint) if typing.get_origin(hint) is Union else (hint,)
    if isinstance(value, list) and any(typing.get_origin(arm) is tuple for arm in arms):
        return tuple(value)
    if float in arms and int not in arms and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def describe_field(hint: Any, meta: Mapping[str, Any]) -> str:
    """The type and range of a field in words: ``an integer >= 1 or null``."""
    arms = typing.get_args(hint) if typing.get_origin(hint) is Union else (hint,)
    words = [describe(arm) for arm in arms if arm is not type(None)]
    text = " or ".join(words)
    if meta["interval"] is not None:
        text += f" {meta['interval']}"
    if type(None) in arms:
        text += " or null"
    return text
