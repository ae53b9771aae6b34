"""The run config a bundle carries, damaged or replaced after the bundle was written: not UTF-8,
not YAML, not a mapping. ``from_pretrained`` refuses it with a ``DataError`` naming the file and
the fix. Before, these failed with a bare ``UnicodeDecodeError`` or ``yaml`` error (a traceback)
or, for a list, were handed on as the encoder's ``config``. A bundle's ``preprocessing.json`` or
``config.yaml`` changed after it was written (a changed mean, a flipped digit) was used silently:
only the weights' sha256 was recorded; now ``bundle.json`` records theirs too."""

import json

import pytest
import yaml

import gspdml
from gspdml.data.eval_transform import MAX_SIDE
from gspdml.errors import ConfigError, DataError
from gspdml.retrieval.bundle import write_bundle
from tests.helpers.retrieval import EVAL_TRANSFORM, write_run


@pytest.fixture
def bundle(tmp_path):
    write_run(tmp_path / "run")
    return write_bundle(tmp_path / "run", tmp_path / "bundle")


def _without_digests(bundle):
    info = json.loads((bundle / "bundle.json").read_text())
    del info["files"]
    (bundle / "bundle.json").write_text(json.dumps(info))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("name: café\n".encode("latin-1"), "UnicodeDecodeError"),
        (b"model: [unclosed\n", "YAMLError|ParserError|ScannerError"),
        (b"- 1\n- 2\n", "expected a mapping at the top level, got list"),
    ],
)
def test_a_damaged_bundled_config_is_refused_naming_it(bundle, content, problem):
    _without_digests(bundle)  # a bundle written before they were recorded: read as it is
    (bundle / "config.yaml").write_bytes(content)
    with pytest.raises(DataError, match=rf"bundle/config\.yaml: .*({problem}).*gspdml bundle"):
        gspdml.from_pretrained(bundle)


def test_an_intact_bundle_carries_its_runs_config(bundle, tmp_path):
    encoder = gspdml.from_pretrained(bundle)
    assert encoder.config["name"] == "run"


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [("preprocessing.json", "0.485", "0.495"), ("config.yaml", "seed: 0", "seed: 1")],
)
def test_a_bundled_file_changed_after_writing_is_refused_by_its_digest(bundle, name, old, new):
    text = (bundle / name).read_text()
    assert old in text
    (bundle / name).write_text(text.replace(old, new, 1))  # parses, and would be used
    with pytest.raises(DataError, match=rf"bundle/{name}: sha256 .* differs from .* bundle\.json"):
        gspdml.from_pretrained(bundle)


def test_a_bundle_written_before_the_digests_were_recorded_still_loads(bundle):
    _without_digests(bundle)
    assert gspdml.from_pretrained(bundle).config["name"] == "run"


def test_a_files_record_of_another_shape_is_refused(bundle):
    info = json.loads((bundle / "bundle.json").read_text())
    info["files"] = {"config.yaml": 5}
    (bundle / "bundle.json").write_text(json.dumps(info))
    with pytest.raises(DataError, match=r"bundle\.json: field 'files' is \{\"config\.yaml\": 5\}"):
        gspdml.from_pretrained(bundle)


def test_a_preprocessing_that_makes_huge_images_is_refused_before_any_image(bundle):
    """A bundle whose preprocessing.json resizes every image to 60,000 pixels a side (about
    14 GB of pixels each, allocated by the first call of the encoder) is refused when it is
    read; before, it loaded and waited for the first image."""
    _without_digests(bundle)
    recorded = json.loads((bundle / "preprocessing.json").read_text())
    (bundle / "preprocessing.json").write_text(json.dumps({**recorded, "resize": [60000]}))
    with pytest.raises(
        DataError, match=rf"preprocessing\.json: resize \[60000\].* at most {MAX_SIDE}"
    ):
        gspdml.from_pretrained(bundle)


def test_a_run_whose_transform_makes_huge_images_is_not_bundled(tmp_path):
    write_run(tmp_path / "run")  # a received run's config.yaml (load_config refuses it now)
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    config["data"]["eval_transform"] = {**EVAL_TRANSFORM, "resize": [9000], "center_crop": 9000}
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=rf"data\.eval_transform: .*at most {MAX_SIDE} pixels"):
        write_bundle(tmp_path / "run", tmp_path / "bundle")
