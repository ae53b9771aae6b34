"""The run config a bundle carries, damaged or replaced after the bundle was written: not UTF-8,
not YAML, not a mapping. ``from_pretrained`` refuses it with a ``DataError`` naming the file and
the fix. Before, these failed with a bare ``UnicodeDecodeError`` or ``yaml`` error (a traceback)
or, for a list, were handed on as the encoder's ``config``."""

import pytest

import gspdml
from gspdml.errors import DataError
from gspdml.retrieval.bundle import write_bundle
from tests.helpers.retrieval import write_run


@pytest.fixture
def bundle(tmp_path):
    write_run(tmp_path / "run")
    return write_bundle(tmp_path / "run", tmp_path / "bundle")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("name: café\n".encode("latin-1"), "UnicodeDecodeError"),
        (b"model: [unclosed\n", "YAMLError|ParserError|ScannerError"),
        (b"- 1\n- 2\n", "expected a mapping at the top level, got list"),
    ],
)
def test_a_damaged_bundled_config_is_refused_naming_it(bundle, content, problem):
    (bundle / "config.yaml").write_bytes(content)
    with pytest.raises(DataError, match=rf"bundle/config\.yaml: .*({problem}).*gspdml bundle"):
        gspdml.from_pretrained(bundle)


def test_an_intact_bundle_carries_its_runs_config(bundle, tmp_path):
    encoder = gspdml.from_pretrained(bundle)
    assert encoder.config["name"] == "run"
