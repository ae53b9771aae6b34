"""Plugins: modules outside gspdml that register components on import, named by an entry point
in the group :data:`ENTRY_POINT_GROUP` (imported the first time a config is read) or by a run
config's ``plugins: [module, ...]``. A run records the plugin modules it depends on (those its
``plugins`` key names and those whose components it uses, whoever imported them) with their
distribution, version, file and SHA-256 (:func:`run_plugins`, written to ``environment.json``);
:func:`require_recorded` imports a run's modules again or names the missing one; a script's own
module, :data:`SCRIPT`, it never imports (that would be the reading process's own program, not
the script; and a received run must not run code): the caller checks its components
(:func:`gspdml.training.run_plugins.require_script_components`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

from gspdml.errors import ConfigError
from gspdml.file_digest import file_sha256

ENTRY_POINT_GROUP = "gspdml.plugins"
#: the module of a script run as a program (``python train.py``, a notebook): never imported back
SCRIPT = "__main__"
#: module name -> its record, for every plugin module imported in this process
_IMPORTED: dict[str, dict[str, Any]] = {}
_ENTRY_POINTS_LOADED = False


def _distribution(module: str) -> Optional[tuple[str, str]]:
    """(distribution name, version) of the installed distribution that provides ``module``."""
    top = module.split(".")[0]
    for name in metadata.packages_distributions().get(top, []):
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _file_digest(path: Optional[str]) -> Optional[str]:
    return file_sha256(path) if path and Path(path).is_file() else None


def _record(module: str, source: str) -> dict[str, Any]:
    """A module's record; one loaded from a file without a name in ``sys.modules`` (a script's
    own classes) is recorded by its name alone."""
    path = getattr(sys.modules.get(module), "__file__", None)
    dist = _distribution(module)
    return {
        "module": module,
        "source": source,
        "distribution": None if dist is None else dist[0],
        "version": None if dist is None else dist[1],
        "file": path,
        "sha256": _file_digest(path),
    }


def import_plugins(modules: Iterable[str], field: str = "plugins") -> list[dict[str, Any]]:
    """Import each module of a config's ``plugins`` key; a module that is not found or fails to
    import is a :class:`ConfigError` naming it and the fix. Returns their records."""
    records = []
    for module in modules:
        if module not in _IMPORTED:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                raise ConfigError(
                    field,
                    f"plugin module {module!r} is not installed ({exc}); install the package "
                    "that provides it or put its folder on PYTHONPATH",
                ) from None
            except Exception as exc:  # a plugin's own import error, named
                raise ConfigError(
                    field, f"plugin module {module!r} failed to import: {type(exc).__name__}: {exc}"
                ) from exc
            _IMPORTED[module] = _record(module, "config")
        records.append(_IMPORTED[module])
    return records


def load_entry_points() -> list[dict[str, Any]]:
    """Import every module of the ``gspdml.plugins`` entry points (once per process)."""
    global _ENTRY_POINTS_LOADED
    if not _ENTRY_POINTS_LOADED:
        _ENTRY_POINTS_LOADED = True
        for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            module = point.value.split(":")[0].strip()
            try:
                point.load()
            except Exception as exc:
                _ENTRY_POINTS_LOADED = False
                raise ConfigError(
                    f"entry point {ENTRY_POINT_GROUP}:{point.name}",
                    f"plugin module {module!r} failed to import: {type(exc).__name__}: {exc}",
                ) from exc
            _IMPORTED.setdefault(module, _record(module, f"entry point {point.name}"))
    return [r for r in _IMPORTED.values() if r["source"].startswith("entry point")]


def run_plugins(asked: Iterable[str], defining: Iterable[str]) -> list[dict[str, Any]]:
    """The records of the plugin modules a run depends on, by module name: each module of
    ``asked`` (its config's ``plugins`` key) and, for each module outside gspdml that defines a
    component the run uses (``defining``: the constructors' ``__module__``), the plugin modules
    of its top package imported by a ``plugins`` key or an entry point (they registered it), else
    that module itself (imported by the caller's own code)."""
    records = {r["module"]: r for r in import_plugins(asked)}
    for module in defining:
        top = module.split(".")[0]
        by_plugin = [name for name in _IMPORTED if name.split(".")[0] == top]
        for name in by_plugin or [module]:
            if name not in records:
                records[name] = _IMPORTED.get(name) or _record(name, "imported by the caller")
    return [records[name] for name in sorted(records)]


def require_recorded(records: Sequence[Mapping[str, Any]], where: str) -> list[str]:
    """Import the plugin modules a run recorded (``where``: its file), or name what provided a
    missing one; returns notes for modules whose file differs from the recorded one."""
    notes = []
    for record in records:
        module = str(record["module"])
        if module == SCRIPT:
            continue  # module doc
        try:
            import_plugins([module], field=where)
        except ConfigError as exc:
            dist = record.get("distribution")
            need = (
                f"pip install '{dist}=={record.get('version')}'"
                if dist
                else f"put the folder of {Path(str(record.get('file'))).name} "
                f"(was {record.get('file')}) on PYTHONPATH"
            )
            raise ConfigError(
                where, f"the run was trained with plugin module {module!r}: {need}"
            ) from exc
        now = _IMPORTED[module]
        if record.get("sha256") and now["sha256"] != record["sha256"]:
            notes.append(
                f"plugin module {module!r} differs from the one the run was trained with "
                f"({now['file']}, {now['sha256'][:19]}; recorded {record['sha256'][:19]})"
            )
    return notes
