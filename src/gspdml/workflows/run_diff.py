"""``gspdml diff RUN_A RUN_B``: what differs between two runs, key by key.

- ``config``: every key of the two ``config.yaml`` files whose value differs
  (:func:`gspdml.training.config_changes.config_differences`: a key one run predates counts at
  its default);
- ``components``: the components' resolved options, defaults included (``components.json``,
  :mod:`gspdml.training.component_options`), each named by the key a user writes in a config or
  an override (``loss.margin``, ``loss.base.margin``), as ``--resume`` names it
  (:func:`gspdml.training.component_options.option_keys`);
- ``environment``: thread counts, CPU, device, precision and plugin modules
  (``environment.json``, :mod:`gspdml.training.run_record`; a list, such as the plugins, is one
  value);
- ``data``: the data each trained on (``data.json``, :mod:`gspdml.training.data_fingerprint`);
- ``results``: the test metrics of ``results.json``, B - A.

Keys are dotted by :func:`gspdml.dotted_keys.dotted_keys`, the rule of the config diff. A file that
one run lacks (written before the release that records it) is said so, not compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gspdml.config import parse_yaml
from gspdml.dotted_keys import dotted_keys
from gspdml.errors import DataError, read_json_object
from gspdml.training.component_options import COMPONENTS_FILE, option_keys
from gspdml.training.config_changes import config_differences
from gspdml.training.data_fingerprint import differences
from gspdml.training.run_dir import CONFIG_FILE, DATA_FILE, RESULTS_FILE
from gspdml.training.run_record import ENVIRONMENT_FILE


def _changed(fa: Mapping[str, Any], fb: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (a, b)}`` of the dotted keys whose values differ (a missing key: ``<absent>``)."""
    absent = "<absent>"
    return {
        k: (fa.get(k, absent), fb.get(k, absent))
        for k in sorted(set(fa) | set(fb))
        if fa.get(k, absent) != fb.get(k, absent)
    }


def _read(run: Path, name: str) -> Any:
    path = run / name
    if not path.is_file():
        return None
    if name == CONFIG_FILE:
        return parse_yaml(path.read_text(encoding="utf-8"))
    return read_json_object(path)


def diff_runs(run_a: str | Path, run_b: str | Path) -> dict[str, Any]:
    """``{section: {key: (a, b)} | [lines] | "missing in A/B"}`` (module doc)."""
    a, b = Path(run_a), Path(run_b)
    for run in (a, b):
        if not (run / CONFIG_FILE).is_file():
            raise DataError(f"{run}: not a gspdml run folder (no {CONFIG_FILE})")
    out: dict[str, Any] = {}
    for section, name in (
        ("config", CONFIG_FILE),
        ("components", COMPONENTS_FILE),
        ("environment", ENVIRONMENT_FILE),
        ("data", DATA_FILE),
        ("results", RESULTS_FILE),
    ):
        left, right = _read(a, name), _read(b, name)
        if left is None or right is None:
            which = " and ".join(n for n, v in (("A", left), ("B", right)) if v is None)
            out[section] = f"{name} missing in {which}"
        elif section == "config":
            out[section] = config_differences(left, right)
        elif section == "data":
            out[section] = differences(left, right)
        elif section == "results":
            test_a, test_b = left.get("test", {}), right.get("test", {})
            out[section] = {
                k: (test_a.get(k), test_b.get(k))
                for k in sorted(set(test_a) | set(test_b))
                if isinstance(test_a.get(k), (int, float))
                or isinstance(test_b.get(k), (int, float))
                if test_a.get(k) != test_b.get(k)
            }
        elif section == "components":
            out[section] = _changed(option_keys(left), option_keys(right))
        else:
            out[section] = _changed(dotted_keys(left), dotted_keys(right))
    return out


def diff_text(result: Mapping[str, Any]) -> str:
    """The diff as lines: ``section: key: A -> B``."""
    lines = []
    for section, changes in result.items():
        if isinstance(changes, str):
            lines.append(f"{section}: {changes}")
        elif isinstance(changes, list):
            lines += [f"{section}: {line}" for line in changes] or [f"{section}: same"]
        elif not changes:
            lines.append(f"{section}: same")
        else:
            for key, (left, right) in changes.items():
                delta = ""
                if isinstance(left, (int, float)) and isinstance(right, (int, float)):
                    delta = f" ({right - left:+.4g})"
                lines.append(f"{section}: {key}: {left!r} -> {right!r}{delta}")
    return "\n".join(lines) + "\n"
