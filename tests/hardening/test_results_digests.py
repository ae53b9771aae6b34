"""The digests a run's ``results.json`` records (``weights_sha256``, ``config_sha256``: which
weights and config the results describe) must be strings; anything else is a ``DataError``
naming the file, the field and the fix. Before, a number there failed with a bare ``TypeError``
('int' object is not subscriptable) while composing the mismatch message."""

import json

import pytest

from gspdml.errors import DataError
from gspdml.training import load_run
from gspdml.training.run_dir import RESULTS_FILE
from tests.helpers.retrieval import write_run


@pytest.mark.parametrize(
    ("field", "value"), [("weights_sha256", 5), ("config_sha256", ["x"]), ("weights_sha256", {})]
)
def test_a_recorded_digest_that_is_not_a_string_is_refused_naming_it(tmp_path, field, value):
    write_run(tmp_path / "run")
    (tmp_path / "run" / RESULTS_FILE).write_text(json.dumps({field: value}))
    with pytest.raises(
        DataError, match=rf"results\.json: field '{field}' is .*, not a sha256; delete"
    ):
        load_run(tmp_path / "run")


def test_a_run_without_recorded_digests_loads(tmp_path):
    write_run(tmp_path / "run")
    (tmp_path / "run" / RESULTS_FILE).write_text(json.dumps({"weights_sha256": None}))
    config, _ = load_run(tmp_path / "run")
    assert config.name == "run"
