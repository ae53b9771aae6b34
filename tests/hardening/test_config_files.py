"""A config file that is not a config: bytes that are not UTF-8, or megabytes of text, are
refused naming the file before the YAML parser sees them. Before, a Latin-1 file failed with a
bare ``UnicodeDecodeError`` (a traceback from ``gspdml train``) and a file of any size was read
and parsed whole (a 1 MiB file of comments loaded as an empty config: every default); a document
that is an empty list, ``0``, ``false`` or ``''`` was silently taken for an empty config."""

import pytest

from gspdml.config import load_config
from gspdml.config.loading import MAX_CONFIG_BYTES
from gspdml.config.migration import read_run_config
from gspdml.errors import ConfigError


def test_a_config_that_is_not_utf8_is_refused_naming_the_byte(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_bytes("name: café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"run\.yaml: not UTF-8 text \(byte 0xe9 at position 9\)"):
        load_config(path)


def test_a_base_that_is_not_utf8_is_named_itself(tmp_path):
    (tmp_path / "base.yaml").write_bytes(b"seed: 1\n# \xff\n")
    (tmp_path / "run.yaml").write_text("base: base.yaml\n")
    with pytest.raises(
        ConfigError, match=r"base\.yaml: not UTF-8 text \(byte 0xff at position 10\)"
    ):
        load_config(tmp_path / "run.yaml")


def test_a_config_of_megabytes_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "run.yaml"
    line = b"# " + b"x" * 1021 + b"\n"
    path.write_bytes(b"seed: 7\n" + line * (MAX_CONFIG_BYTES // len(line) + 1))
    with pytest.raises(ConfigError, match=rf"run\.yaml: more than {MAX_CONFIG_BYTES} bytes"):
        load_config(path)


def test_a_utf8_config_with_other_scripts_loads(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: café-кошка-猫\nseed: 2\n", encoding="utf-8")
    config = load_config(path)
    assert (config.name, config.seed) == ("café-кошка-猫", 2)


@pytest.mark.parametrize("document", ["[]", "0", "false", "''"])
def test_a_document_that_is_no_mapping_is_refused_even_when_empty(tmp_path, document):
    path = tmp_path / "run.yaml"
    path.write_text(document + "\n")
    with pytest.raises(ConfigError, match=r"run\.yaml: expected a mapping at the top level"):
        load_config(path)


def test_an_empty_config_file_is_the_defaults(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("# nothing set\n")
    assert load_config(path) == load_config({})


def test_a_received_runs_config_of_megabytes_is_refused_before_it_is_parsed(tmp_path):
    """A run folder's ``config.yaml``, read back by load_run, report, evaluate, bundle and index
    (:func:`read_run_config`), is read by the same bounded reader; before, a config.yaml of
    8 MiB of comments took seconds to parse, and one of a gigabyte a quarter of an hour."""
    path = tmp_path / "config.yaml"
    line = b"# " + b"x" * 1021 + b"\n"
    path.write_bytes(b"seed: 7\n" + line * (MAX_CONFIG_BYTES // len(line) + 1))
    with pytest.raises(ConfigError, match=rf"config\.yaml: more than {MAX_CONFIG_BYTES} bytes"):
        read_run_config(path)
    path.write_bytes("name: café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"config\.yaml: not UTF-8 text \(byte 0xe9"):
        read_run_config(path)
