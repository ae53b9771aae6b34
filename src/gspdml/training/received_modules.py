"""The modules a received folder names (a weights file's ``model.factory``, the plugin modules of
a run's ``environment.json``) are imported only from outside that folder.

A bundle or a run folder is a received file: it may name code the reader has installed, never
bring its own. Python finds a module on ``sys.path``, which holds the working directory of
``python -c``, a notebook or a script run from the folder above, so a folder ``received/`` with
an ``evil.py`` beside its weights would otherwise be imported (and run) as ``received.evil``.
:func:`refuse_module_inside` locates every level of a dotted module name without importing it
(``importlib.machinery.PathFinder``, as the import system searches a package's ``__path__``) and
refuses the name when one of them lies inside the folder.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from gspdml.errors import ConfigError


def _locations(module: str) -> Iterator[str]:
    """The files and package folders Python would import ``module`` and its parent packages
    from, found without importing any of them (an already imported one: where it came from)."""
    search: list[str] | None = None
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        loaded = sys.modules.get(name)
        if loaded is not None:
            origin = getattr(loaded, "__file__", None)
            places = list(getattr(loaded, "__path__", None) or [])
        else:
            try:
                spec = (
                    importlib.util.find_spec(name)
                    if depth == 1
                    else importlib.machinery.PathFinder.find_spec(name, search)
                )
            except (ImportError, ValueError):
                return
            if spec is None:
                return  # not found: the import itself names the missing module
            origin = spec.origin if spec.has_location else None
            places = list(spec.submodule_search_locations or [])
        yield from ([origin] if origin else []) + places
        search = places


def _inside(place: str, folder: Path) -> bool:
    resolved = Path(os.path.realpath(place))
    return resolved == folder or folder in resolved.parents


def refuse_module_inside(
    module: str, folder: str | os.PathLike[str], where: str, field: str
) -> None:
    """Raise a :class:`ConfigError` when ``module`` (named at ``field`` of the file ``where``)
    would be imported from inside ``folder`` (module docstring)."""
    root = Path(os.path.realpath(folder))
    for place in _locations(module):
        if _inside(place, root):
            raise ConfigError(
                field,
                f"{where} names the module {module!r}, which would be imported from {place}, "
                f"inside the folder being read ({root}); gspdml never runs code that a received "
                "folder brings: install that module as a package (or put it on PYTHONPATH "
                "outside the folder) and run again from another directory",
            )
