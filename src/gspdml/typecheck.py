"""Config values checked against the type annotations of the constructors they are passed to.

:func:`option_types` reads a component's constructor signature (its annotations, resolved; a
parameter without one is typed by its default), and :func:`check_value` tells whether a value
from YAML fits: ``int`` takes integers (not booleans), ``float`` takes any number, ``bool`` only
``true``/``false``, ``Optional``/``Union``/``Literal`` and lists/tuples/mappings of those are
followed. Types that YAML cannot spell (modules, tensors, callables) are not checked here; the
components check those values themselves.
"""

from __future__ import annotations

import collections.abc
import inspect
import os
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Optional, Union

_NOTHING = object()


def option_types(factory: Callable[..., Any]) -> dict[str, Any]:
    """``{parameter: type}`` of ``factory``'s keyword parameters that have an annotation or a
    non-None default."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # noqa: BLE001 - unresolvable forward references: fall back to the defaults
        hints = {}
    types = {}
    for name, param in params.items():
        hint = hints.get(name, param.annotation)
        if isinstance(hint, str) or hint is inspect.Parameter.empty:
            hint = (
                type(param.default)
                if param.default not in (inspect.Parameter.empty, None)
                else _NOTHING
            )
        if hint is not _NOTHING:
            types[name] = hint
    return types


def check_value(value: Any, hint: Any) -> bool:
    """Whether ``value`` (as YAML gives it) fits the type ``hint`` (unknown types fit)."""
    if hint is Any or hint is object:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:
        return any(check_value(value, arm) for arm in args)
    if origin is Literal:
        return value in args
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is os.PathLike or hint in (os.PathLike, "PathLike"):
        return isinstance(value, str)
    if origin in (list, tuple, collections.abc.Sequence) or hint in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        item = (
            args[0]
            if args
            and (
                origin is not tuple or len(args) == 2 and args[1] is Ellipsis or len(set(args)) == 1
            )
            else Any
        )
        return all(check_value(v, item) for v in value)
    if origin in (dict, collections.abc.Mapping) or hint in (dict, Mapping):
        return isinstance(value, Mapping)
    return True


def describe(hint: Any) -> str:
    """``hint`` in words for an error message (``an integer or null``)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:
        return " or ".join(describe(arm) for arm in args)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin in (list, tuple, collections.abc.Sequence):
        plural = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}
        if not args or args[0] is Any:
            return "a list"
        return f"a list of {plural.get(args[0], describe(args[0]))}"
    if hint is list:
        return "a list"
    if origin in (dict, collections.abc.Mapping) or hint in (dict, Mapping):
        return "a mapping"
    words = {
        type(None): "null",
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
    }
    return words.get(hint, getattr(hint, "__name__", str(hint)))


def first_mismatch(
    factory: Callable[..., Any], options: Mapping[str, Any]
) -> Optional[tuple[str, str]]:
    """``(option, expected)`` of the first option that does not fit ``factory``'s signature, or None."""
    types = option_types(factory)
    for key, value in options.items():
        if key in types and not check_value(value, types[key]):
            return key, describe(types[key])
    return None
