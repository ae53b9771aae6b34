"""``gspdml.dotted_keys``: one rule for flattening a nested mapping, checked against its inverse
(an independent rebuild of the tree from the dotted keys): nothing is dropped, an empty mapping
is a value of its own, a list is one value."""

from __future__ import annotations

from typing import Any

import pytest

from gspdml.dotted_keys import dotted_keys


def _rebuild(flat: dict[str, Any]) -> dict[str, Any]:
    """The nested mapping whose dotted keys are ``flat`` (keys without dots inside a level)."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


TREES = [
    {"evaluation": {"postprocess": {}, "every": 5}},
    {"loss": [{"name": "c2", "neg_margin": 0.5}, {"name": "xbm"}], "trackers": []},
    {"a": {"b": {"c": {}, "d": [1, 2]}, "e": None}, "f": "text"},
    {"empty": {}},
]


@pytest.mark.parametrize("tree", TREES)
def test_dotted_keys_lose_nothing(tree):
    assert _rebuild(dotted_keys(tree)) == tree


def test_an_empty_mapping_and_a_list_are_leaves_and_a_prefix_starts_every_key():
    tree = {"evaluation": {"postprocess": {}}, "loss": [{"name": "c2"}], "model": {"head": None}}
    assert dotted_keys(tree, "run.") == {
        "run.evaluation.postprocess": {},
        "run.loss": [{"name": "c2"}],
        "run.model.head": None,
    }
    assert dotted_keys({"evaluation": {"postprocess": {}}}) != dotted_keys({"evaluation": {}})
