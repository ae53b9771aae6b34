"""What every command module uses: a sub-command declared in one line, and parsed arguments
bound to a library function by name (an option's ``dest`` is the name of the parameter it
sets)."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

_Result = TypeVar("_Result")


def command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    func: Callable[[argparse.Namespace], int],
    **kw: Any,
) -> Callable[..., Any]:
    """Add the sub-command ``name`` (``kw``: ``help``, ``description``) that runs ``func(args)``;
    returns its ``add_argument``."""
    parser = sub.add_parser(name, **kw)
    parser.set_defaults(func=func)
    return parser.add_argument


def call(function: Callable[..., _Result], args: argparse.Namespace, **given: Any) -> _Result:
    """``function(**given)`` with every other parameter of ``function`` that ``args`` holds."""
    names = inspect.signature(function).parameters
    found = {name: getattr(args, name) for name in names if name not in given and name in args}
    return function(**found, **given)
