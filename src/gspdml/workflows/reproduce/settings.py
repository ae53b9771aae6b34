"""The ``key=value`` settings of a spec table (``gspdml reproduce TABLE key=value``):
what differs per machine (model files, the device, the batch size), parsed into the frozen
dataclass of the table's protocol (:class:`~gspdml.workflows.reproduce.cir_run.CirSettings`,
:class:`~gspdml.workflows.reproduce.frozen_run.FrozenSettings`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, TypeVar

from gspdml.errors import ConfigError

Settings = TypeVar("Settings")


def parse_settings(cls: type[Settings], overrides: Sequence[str], protocol: str) -> Settings:
    """``cls`` from ``key=value`` strings: ``key`` a field of ``cls``, a value for a field whose
    default is an int a positive integer; anything else is a ConfigError naming the setting,
    the protocol's keys and the fix."""
    defaults = {f.name: f.default for f in fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or key not in defaults or not value:
            raise ConfigError(
                "overrides",
                f"{override!r}: a {protocol} table takes key=value settings with key one of "
                f"{', '.join(defaults)} (e.g. {next(iter(defaults))}=VALUE)",
            )
        values[key] = value
    for key, value in values.items():
        if isinstance(defaults[key], int):
            number = int(value) if value.isdigit() else 0
            if number < 1:
                raise ConfigError(key, f"expected a positive integer, got {value!r}")
            values[key] = number
    return cls(**values)
