"""``gspdml.from_pretrained`` on a name that is no folder. A local path (a file, a ``Path``, a
name starting with ``.``, ``~`` or ``/``, or with more separators than a hub repository's
``owner/name``) is refused naming it, never looked up on the hub. Before, every such name went
to ``huggingface_hub.snapshot_download``, which answered with a message about repository ids
(``HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name'``) or a
network failure, naming no missing folder; a bundle's weights file given for its folder said the
same."""

import pytest

import gspdml
import gspdml.retrieval.bundle as bundle_module
from gspdml.errors import DataError


@pytest.fixture
def hub(monkeypatch):
    """The hub lookups made (each refused, as an absent repository is)."""
    asked = []

    def snapshot(repo_id, *args):
        asked.append(repo_id)
        raise DataError(f"{repo_id}: cannot load the hub repository (test)")

    monkeypatch.setattr(bundle_module, "_hub_snapshot", snapshot)
    return asked


@pytest.mark.parametrize(
    "name",
    ["./bundle", "../bundles/b", "~/gspdml-no-such-bundle", "/no/such/bundle", "runs/a/bundle",
     "runs\\bundle", ".bundle", "my bundle", "owner/"],
)  # fmt: skip
def test_a_local_path_that_is_no_folder_is_named_not_looked_up(hub, name):
    with pytest.raises(DataError, match=r"no such folder \(a local path, never looked up"):
        gspdml.from_pretrained(name)
    assert hub == []


def test_a_path_object_is_local(hub, tmp_path):
    with pytest.raises(DataError, match=rf"^{tmp_path / 'missing'}: no such folder"):
        gspdml.from_pretrained(tmp_path / "missing")
    assert hub == []


def test_a_file_is_named_with_its_bundle_folder(hub, tmp_path, monkeypatch):
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "bundle.json").write_text("{}")
    (tmp_path / "bundle" / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "notes.txt").write_text("a file")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        DataError,
        match=r"model\.safetensors: not a bundle folder \(it is a file\); pass its folder .*bundle, a bundle",
    ):
        gspdml.from_pretrained("bundle/model.safetensors")
    with pytest.raises(
        DataError,
        match=r"notes\.txt: not a bundle folder \(it is a file\); pass the folder gspdml bundle",
    ):
        gspdml.from_pretrained("notes.txt")
    assert hub == []


@pytest.mark.parametrize("name", ["someone/gsp-demo", "gsp_demo", "Some.One/model-v1.2"])
def test_a_hub_repository_id_is_still_looked_up(hub, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    with pytest.raises(DataError, match="cannot load the hub repository"):
        gspdml.from_pretrained(name)
    assert hub == [name]
