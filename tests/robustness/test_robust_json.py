"""Every JSON gspdml writes is standard JSON (RFC 8259: no ``NaN`` or ``Infinity`` token), and
no evaluation reports NaN for a set without a query to score (issue 39 #8: every class one image
gave ``NaN`` metrics, ``num_queries: 0`` and a ``results.json`` other parsers refuse)."""

import ast
import json
import math
from pathlib import Path

import pytest

import gspdml
from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.output_files import json_text
from gspdml.training import train
from tests.helpers.images import folder_config, image_folder

PACKAGE = Path(gspdml.__file__).parent
#: json.dumps calls that write no JSON document: hash inputs, safetensors header strings read
#: back by gspdml's own reader, label and path lists inside an .npz, HTML and Markdown text
NOT_DOCUMENTS = {
    "config/reference.py",
    "data/cache.py",
    "cir/features.py",
    "evaluation/results.py",
    "retrieval/report.py",
    "training/checkpoint.py",
    "training/pretrain.py",
    "training/run_lock.py",
    "cli/listing.py",
    "data/fetch.py",
}


def strict(text: str):
    """``json.loads`` that refuses the non-standard tokens, as other parsers do."""

    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_json_text_writes_non_finite_numbers_as_null():
    value = {"a": math.nan, "b": [math.inf, 1.5, {"c": -math.inf}], "d": (2, math.nan), "e": "NaN"}
    assert strict(json_text(value, indent=1)) == {
        "a": None,
        "b": [None, 1.5, {"c": None}],
        "d": [2, None],
        "e": "NaN",
    }
    with pytest.raises(ValueError):
        strict(json.dumps({"a": math.nan}))  # what the writers did before


def test_every_json_document_is_written_by_json_text():
    """A scan of the package: ``json.dumps`` / ``json.dump`` only where no JSON document is
    written (:data:`NOT_DOCUMENTS`); files and printouts go through ``json_text``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("dumps", "dump")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "json"
            ):
                found.append(path.relative_to(PACKAGE).as_posix())
    assert "output_files.py" in found, "the scan found no json.dumps: it is not reading the package"
    outside = sorted(set(found) - NOT_DOCUMENTS - {"output_files.py"})
    assert not outside, f"JSON written without json_text (NaN would be written as NaN): {outside}"


def test_a_test_split_without_a_query_to_score_is_refused_before_training(tmp_path):
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 1, "d": 1})
    config = load_config(folder_config(root, tmp_path / "runs"))
    with pytest.raises(ConfigError) as error:
        train(config, tmp_path / "runs" / "lone")
    message = str(error.value)
    assert message.startswith("evaluation.split: the test split has no query to score")
    assert "(2 queries, every class one image)" in message
    assert not (tmp_path / "runs" / "lone" / "results.json").exists()
