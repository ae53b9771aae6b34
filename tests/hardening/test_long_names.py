"""An output whose name is long but valid (up to the 255 bytes a file name may have) is written,
atomically as any other; so is a bundle folder of such a name. Before, the temporary name
``.NAME.<random>.tmp`` added 14 bytes to it, so every name of 242 to 255 bytes failed with
``File name too long`` though the target itself could be created."""

import os

import pytest

from gspdml.output_files import (
    TEMP_SUFFIX,
    atomic_write_text,
    remove_stale_temporaries,
    replace_folder,
    temporary_prefix,
)
from gspdml.retrieval.bundle import write_bundle
from tests.helpers.retrieval import write_run


@pytest.mark.parametrize("length", [241, 250, 255])
def test_an_output_with_a_long_valid_name_is_written(tmp_path, length):
    path = tmp_path / ("r" * (length - 5) + ".json")
    assert len(os.fsencode(path.name)) == length
    atomic_write_text(path, "{}\n")
    atomic_write_text(path, "[]\n")  # and replaced
    assert path.read_text() == "[]\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_long_name_of_multibyte_characters_is_cut_on_bytes(tmp_path):
    path = tmp_path / ("é" * 125 + ".txt")  # 254 bytes in UTF-8
    atomic_write_text(path, "ok")
    assert path.read_text() == "ok"


def test_a_killed_writers_temporary_of_a_long_name_is_still_found(tmp_path):
    path = tmp_path / ("k" * 250 + ".json")
    stale = tmp_path / f"{temporary_prefix(path.name)}abcd1234{TEMP_SUFFIX}"
    stale.write_text("half")
    assert remove_stale_temporaries(tmp_path) == [stale]


def test_a_bundle_folder_with_a_long_valid_name_is_written(tmp_path):
    write_run(tmp_path / "run")
    out = write_bundle(tmp_path / "run", tmp_path / ("b" * 250))
    assert (out / "bundle.json").is_file()


def test_a_folder_of_a_long_name_is_replaced_without_renameat2(tmp_path, monkeypatch):
    """The fallback of systems without an atomic exchange renames the previous folder aside
    under a temporary name built the same way."""
    monkeypatch.setattr("gspdml.output_files._exchange", lambda first, second: False)
    target = tmp_path / ("f" * 250)
    target.mkdir()
    (target / "old.txt").write_text("old")
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "new.txt").write_text("new")
    replace_folder(staging, target)
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]
