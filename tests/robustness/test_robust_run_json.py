"""A damaged ``results.json`` or ``data.json`` in a run folder is a ``gspdml: error`` naming the
file and the fix (issue 39, defect 13).

Before, a truncated or hand-edited file escaped as a raw ``JSONDecodeError``, ``KeyError`` or
``AttributeError`` from the reuse rule of ``reproduce``/``protocol``, from ``gspdml bundle`` and
from ``--resume``. Both files are now read by one validating reader each
(``gspdml.training.run_dir.read_results`` / ``read_data_record``).
"""

import pytest

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.errors import DataError
from gspdml.training import train
from gspdml.training.run_dir import read_results
from gspdml.workflows.runner import PlannedRun, run_planned
from tests.helpers.images import folder_config, image_folder
from tests.helpers.retrieval import write_run

DAMAGED = {
    "truncated": '{"test": {"map_at_r": 0.3',
    "not an object": "[0.31, 0.62]",
    "test not an object": '{"test": 0.31}',
}


@pytest.mark.parametrize("damage", DAMAGED)
def test_a_finished_run_with_a_damaged_results_file_is_named_when_reused(tmp_path, damage):
    config = write_run(tmp_path / "run")
    (tmp_path / "run" / "results.json").write_text(DAMAGED[damage])
    with pytest.raises(DataError) as err:
        run_planned(PlannedRun("run", config, tmp_path / "run"))
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'run' / 'results.json'}: ")
    assert "delete it and run the same command again" in message


def test_bundle_of_a_run_with_a_damaged_results_file_is_a_clear_error(tmp_path, capsys):
    write_run(tmp_path / "run")
    (tmp_path / "run" / "results.json").write_text(DAMAGED["truncated"])
    assert main(["bundle", str(tmp_path / "run"), "--out", str(tmp_path / "bundle")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gspdml: error: {tmp_path / 'run' / 'results.json'}: not a readable")


def test_the_results_reader_checks_the_fields_its_caller_needs(tmp_path):
    (tmp_path / "results.json").write_text('{"test": {"map_at_r": 0.3}}')
    assert read_results(tmp_path, {"test": dict}) == {"test": {"map_at_r": 0.3}}
    with pytest.raises(DataError, match=r"results\.json: field 'steps' is missing"):
        read_results(tmp_path, {"steps": int})
    assert read_results(tmp_path / "elsewhere") is None


@pytest.mark.parametrize(
    "content", ['{"train": {"items": 8', '{"train": 5}', '{"train": {"class_names": 3}}']
)
def test_resume_with_a_damaged_data_record_names_the_file_and_the_fix(tmp_path, content):
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    config = load_config(folder_config(root, tmp_path / "runs"))
    run_dir = tmp_path / "runs" / "robust"
    train(config, run_dir)
    (run_dir / "data.json").write_text(content)
    with pytest.raises(DataError) as err:
        train(config, run_dir, resume=True)
    message = str(err.value)
    assert message.startswith(f"{run_dir / 'data.json'}: ")
    assert "delete it" in message and "--allow-data-change" in message
    train(config, run_dir, resume=True, allow_data_change=True)  # the fix it names works
