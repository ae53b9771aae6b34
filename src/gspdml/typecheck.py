"""Config values checked against the type annotations of the constructors they are passed to.

:func:`option_types` reads a constructor's annotations (a parameter without one is typed by its
default); :func:`check_value` tells whether a YAML value fits one (``float`` takes any number,
``int`` and ``float`` no boolean). An option declares its range or choices with its type,
``mu: Annotated[float, Interval(0, 1, low_open=True)]``: :func:`out_of_range` checks them. Types
that YAML cannot spell (modules, tensors, callables) are the components' to check.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import math
import os
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Optional, Union


@dataclasses.dataclass(frozen=True)
class Interval:
    """The numbers an option allows, declared with it: ``Annotated[float, Interval(0, 1)]``."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    odd: bool = False  # a kernel size: odd integers only
    what: str = ""  # the option in words, leading its error (``the transported fraction``)

    def admits(self, value: Any) -> bool:
        """Whether ``value`` lies in the interval (a value that is no number is the type's to check)."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return True
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below and (not self.odd or value % 2 == 1)

    def __str__(self) -> str:
        """``> 0``, ``>= 1 and odd``, ``in (0, 1]``."""
        odd = " and odd" if self.odd else ""
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {self.low:g}{odd}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{self.low:g}, {self.high:g}{right}{odd}"

    def must_be(self, value: Any) -> str:
        """The error message for a ``value`` outside: ``must be positive, got 0``."""
        words = {"> 0": "positive", ">= 0": "non-negative"}
        return f"{self.what} must be {words.get(str(self), str(self))}, got {value!r}".lstrip()


@dataclasses.dataclass(frozen=True)
class OneOf:
    """The values an option allows, from a module's vocabulary: ``Annotated[str, OneOf(WEIGHTINGS)]``."""

    choices: tuple[Any, ...]
    noun: str = "value"  # ``unknown mining 'easy'``

    def admits(self, value: Any) -> bool:
        return value in self.choices

    def __str__(self) -> str:
        return "one of " + ", ".join(map(repr, self.choices))

    def must_be(self, value: Any) -> str:
        return f"unknown {self.noun} {value!r}; allowed: {', '.join(map(str, self.choices))}"


#: ``(option, message)`` of a refused option, or None
Refusal = Optional[tuple[str, str]]

#: the most common ranges, by name
POSITIVE = Interval(0, low_open=True)
NON_NEGATIVE = Interval(0)
AT_LEAST_1 = Interval(1)
ODD_SIZE = Interval(1, odd=True)
UNIT = Interval(0, 1)
#: ``lambda`` of ``(1 - lambda) base + lambda L_extra`` (ZSR, XML)
MIXING = Interval(0, 1, what="the mixing weight lambda")


def option_types(factory: Callable[..., Any]) -> dict[str, Any]:
    """``{parameter: type}`` of ``factory``'s keyword parameters that have an annotation or a
    non-None default."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable forward references: fall back to the defaults
        hints = {}
    types = {}
    for name, param in params.items():
        hint = hints.get(name, param.annotation)
        if isinstance(hint, str) or hint is inspect.Parameter.empty:
            if param.default in (inspect.Parameter.empty, None):
                continue
            hint = type(param.default)
        types[name] = hint
    return types


def check_value(value: Any, hint: Any) -> bool:
    """Whether ``value`` (as YAML gives it) fits the type ``hint`` (unknown types fit)."""
    if hint is Any or hint is object:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return check_value(value, args[0]) and _marker(hint).admits(value)
    if origin is Union:
        return any(check_value(value, arm) for arm in args)
    if origin is Literal:
        return value in args
    if hint is type(None):
        return value is None
    if hint in (bool, str):
        return isinstance(value, hint)
    if hint in (int, float):  # a float option takes an integer too; a boolean is no number
        numbers = int if hint is int else (int, float)
        return isinstance(value, numbers) and not isinstance(value, bool)
    if origin is os.PathLike or hint in (os.PathLike, "PathLike"):
        return isinstance(value, str)
    if origin in (list, tuple, collections.abc.Sequence) or hint in (list, tuple):
        same_items = origin is not tuple or args[1:] == (Ellipsis,) or len(set(args)) == 1
        item = args[0] if args and same_items else Any
        return isinstance(value, (list, tuple)) and all(check_value(v, item) for v in value)
    if origin in (dict, collections.abc.Mapping) or hint in (dict, Mapping):
        return isinstance(value, Mapping)
    return True


_WORDS = {
    type(None): "null",
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
}
_PLURALS = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}


def describe(hint: Any) -> str:
    """``hint`` in words for an error message (``an integer or null``, ``a number in [0, 1]``)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return f"{describe(args[0])} {_marker(hint)}"
    if origin is Union:
        return " or ".join(describe(arm) for arm in args)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin in (list, tuple, collections.abc.Sequence):
        if not args or args[0] is Any:
            return "a list"
        return f"a list of {_PLURALS.get(args[0], describe(args[0]))}"
    if hint is list:
        return "a list"
    if origin in (dict, collections.abc.Mapping) or hint in (dict, Mapping):
        return "a mapping"
    return _WORDS.get(hint, getattr(hint, "__name__", str(hint)))


def first_mismatch(factory: Callable[..., Any], options: Mapping[str, Any]) -> Refusal:
    """``(option, expected)`` of the first option that does not fit ``factory``'s signature, or None."""
    types = option_types(factory)
    for key, value in options.items():
        if key in types and not check_value(value, types[key]):
            return key, describe(types[key])
    return None


def out_of_range(factory: Callable[..., Any], options: Mapping[str, Any]) -> Refusal:
    """``(option, "must be <range>, got <value>")`` of the first option outside the range or
    choices it declares, or None (a value of the wrong type is :func:`first_mismatch`'s)."""
    for key, hint in option_types(factory).items():
        if key not in options:
            continue
        arms = typing.get_args(hint) if typing.get_origin(hint) is Union else (hint,)
        fitting = [arm for arm in arms if check_value(options[key], _base(arm))]
        refused = [arm for arm in fitting if not check_value(options[key], arm)]
        if refused and len(refused) == len(fitting):
            return key, _marker(refused[0]).must_be(options[key])
    return None


def _base(hint: Any) -> Any:
    """The type of an ``Annotated`` hint, or of a ``Literal``'s values when they share one
    (``str`` for ``Literal["mean", "sum"]``); ``hint`` itself otherwise."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return args[0]
    kinds = {type(value) for value in args} if origin is Literal else set()
    return kinds.pop() if len(kinds) == 1 else hint


def _marker(hint: Any) -> Union[Interval, OneOf]:
    """The :class:`Interval` or :class:`OneOf` an ``Annotated`` hint declares, a ``Literal``'s
    values as a :class:`OneOf` (any number if none)."""
    if typing.get_origin(hint) is Literal:
        return OneOf(typing.get_args(hint))
    metadata = getattr(hint, "__metadata__", ())
    return next((m for m in metadata if isinstance(m, (Interval, OneOf))), Interval())
