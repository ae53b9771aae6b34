"""The modules a received folder names (a weights file's ``model.factory``, the plugin modules of
a run's ``environment.json``) are imported only from outside that folder.

A bundle or a run folder is a received file: it may name code the reader has installed, never
bring its own. Python finds a module on ``sys.path``, which holds the working directory of
``python -c``, a notebook or a script run from the folder above, so a folder ``received/`` with
an ``evil.py`` beside its weights would otherwise be imported (and run) as ``received.evil``.
:func:`refuse_module_inside` locates each level of a dotted module name before it is imported
(``importlib.util.find_spec``; a package is imported only once it is known to lie outside, so the
next level is searched in its real ``__path__``) and refuses the name when one of them lies
inside the folder.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from gspdml.errors import ConfigError


def _places(name: str) -> list[str]:
    """The file and package folders Python imports ``name`` from (its parent package already
    imported), found without importing it; [] when it is not found."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
        return ([origin] if origin else []) + list(getattr(loaded, "__path__", None) or [])
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    origin = [spec.origin] if spec.has_location and spec.origin else []
    return origin + list(spec.submodule_search_locations or [])


def _inside(place: str, folder: Path) -> bool:
    resolved = Path(os.path.realpath(place))
    return resolved == folder or folder in resolved.parents


def refuse_module_inside(
    module: str, folder: str | os.PathLike[str], where: str, field: str
) -> None:
    """Raise a :class:`ConfigError` when ``module`` (named at ``field`` of the file ``where``)
    would be imported from inside ``folder`` (module docstring). Each package above it is
    located first and imported only when it lies outside, so its ``__path__`` is the one the
    import uses; nothing inside the folder is imported."""
    root = Path(os.path.realpath(folder))
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        for place in _places(name):
            if _inside(place, root):
                raise ConfigError(
                    field,
                    f"{where} names the module {module!r}, which would be imported from "
                    f"{place}, inside the folder being read ({root}); gspdml never runs code "
                    "that a received folder brings: install that module as a package (or put it "
                    "on PYTHONPATH outside the folder) and run again from another directory",
                )
        if depth < len(parts):
            try:  # a package outside the folder: imported, as the import of module does
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the import of module itself names the failure
                return
