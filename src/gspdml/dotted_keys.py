"""A nested mapping as ``{dotted key: leaf}``: the one rule by which a run's config is compared
(``--resume``, the runner's reuse of a run folder, ``gspdml diff``), its components' options are
checked on resume, its config is logged as a tracker's parameters and its results are tabled in
its report.

The rule: a non-empty mapping opens into its entries (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``);
every other value is a leaf at its dotted key, namely

- a scalar;
- a list or tuple, whole (a changed list is one difference and one tracker parameter, whatever
  its items; MLflow refuses the ``[i]`` of a key by position);
- an empty mapping, as ``{}``: it is a value of its own, so ``postprocess: {}`` differs from no
  ``postprocess`` at all and is never silently dropped.

So every leaf of the input is one entry of the output and two inputs with the same entries hold
the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def dotted_keys(tree: Mapping[Any, Any], prefix: str = "") -> dict[str, Any]:
    """``tree``'s leaves by their dotted keys, each key starting with ``prefix`` (module doc)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            flat.update(dotted_keys(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
