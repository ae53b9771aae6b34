"""Hardening item 18: malformed received files fail with an error naming the file, never a bare
traceback: a checkpoint whose structure is not what gspdml writes, and a bundle's
``bundle.json`` or ``preprocessing.json`` that is not JSON, not an object, nested too deep or
too large. Before, each escaped as ``KeyError``, ``JSONDecodeError``, ``AttributeError`` or
``RecursionError``."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from gspdml.errors import MAX_JSON_BYTES, DataError, read_json_object
from gspdml.retrieval.bundle import from_pretrained, write_bundle
from gspdml.retrieval.index import RetrievalIndex
from gspdml.training.checkpoint import FORMAT, CheckpointError, load_state, save_state
from tests.helpers.retrieval import write_run

MALFORMED = {
    "not json": b"{'format': 'gspdml-bundle'",
    "a list": b"[1, 2, 3]",
    "not utf-8": b'{"format": "\xff"}',
    "too deep": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("content", MALFORMED.values(), ids=MALFORMED.keys())
def test_read_json_object_names_the_file(tmp_path, content):
    path = tmp_path / "side.json"
    path.write_bytes(content)
    with pytest.raises(DataError, match=f"{path}: "):
        read_json_object(path)


def test_read_json_object_refuses_a_file_too_large_before_reading_it(tmp_path):
    path = tmp_path / "big.json"
    with open(path, "wb") as handle:
        handle.truncate(MAX_JSON_BYTES + 1)  # sparse: nothing to read until parsing
    with pytest.raises(DataError, match=f"{path}: {MAX_JSON_BYTES + 1} bytes"):
        read_json_object(path)


@pytest.mark.parametrize("name", ["bundle.json", "preprocessing.json"])
@pytest.mark.parametrize("content", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_bundle_with_a_malformed_side_file_is_refused_naming_it(tmp_path, name, content):
    write_run(tmp_path / "run")
    write_bundle(tmp_path / "run", tmp_path / "bundle")
    assert from_pretrained(tmp_path / "bundle").transform is not None  # intact: loads
    (tmp_path / "bundle" / name).write_bytes(content)
    with pytest.raises(DataError, match=str(tmp_path / "bundle" / name)):
        from_pretrained(tmp_path / "bundle")


@pytest.mark.parametrize(
    "structure",
    [{"__tensor__": "7"}, {"__dict__": 5}, {"__dict__": [[1, 2, 3]]}, {"no": "marker"}],
    ids=["missing tensor", "dict not a list", "pair of three", "unknown object"],
)
def test_a_checkpoint_with_a_malformed_structure_is_named(tmp_path, structure):
    path = tmp_path / "last.safetensors"
    save_state(path, {"step": 3, "weights": torch.ones(2)})
    assert load_state(path)[0]["step"] == 3
    header = {"format": FORMAT, "structure": structure, "meta": {}}
    save_file({"0": torch.ones(2)}, str(path), metadata={"gspdml": json.dumps(header)})
    with pytest.raises(CheckpointError, match=f"{path}: malformed checkpoint structure"):
        load_state(path)


@pytest.mark.parametrize("model", ["a string", [1, 2], {"weights": 7}, {"run_dir": ["x"]}])
def test_an_index_whose_model_field_is_malformed_is_named(tmp_path, model):
    """Hardening item 18: ``index.json``'s ``model`` was used as given (``AttributeError`` or a
    ``TypeError`` later in search); the reader names the file and the field."""
    folder = tmp_path / "index"
    shutil.copytree(Path(__file__).parent / "data" / "index_before_manifests", folder)
    meta = json.loads((folder / "index.json").read_text())
    RetrievalIndex.load(folder)  # intact: loads
    (folder / "index.json").write_text(json.dumps({**meta, "model": model}))
    with pytest.raises(DataError, match=f"{folder / 'index.json'}: field 'model' must be"):
        RetrievalIndex.load(folder)
