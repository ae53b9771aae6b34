"""``components.json`` records the options of each loss, never an entry's ``weight`` in the sum
of losses (the builder takes it out of either form, :func:`gspdml.losses.base.loss_entries`).
Before, an entry in the named form, ``{xbm: {base: c2, weight: 0.5}}``, recorded ``weight`` among
XBM's options while ``{name: xbm, base: c2, weight: 0.5}`` did not, so ``gspdml diff`` of two
runs of the same losses printed ``loss[1].weight: 0.5 -> <absent>``. A ``components.json`` written
that earlier way is read as this version writes it: the run resumes, its diff is empty."""

from __future__ import annotations

import json

import pytest

from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.training import train
from gspdml.training.component_options import resolved_options
from gspdml.workflows.run_diff import diff_runs, diff_text

NAMED = [{"name": "c2", "neg_margin": 0.5}, {"xbm": {"base": "c2", "weight": 0.5}}]
BY_NAME = [{"name": "c2", "neg_margin": 0.5}, {"name": "xbm", "base": "c2", "weight": 0.5}]


@pytest.mark.parametrize("single", [False, True])
def test_both_forms_record_the_same_options_and_no_weight(make_config, single):
    named, by_name = (NAMED[1], BY_NAME[1]) if single else (NAMED, BY_NAME)
    a = resolved_options(load_config(make_config(loss=named)))
    b = resolved_options(load_config(make_config(loss=by_name)))
    assert a == b
    field = "loss" if single else "loss[1]"
    assert a[field]["name"] == "xbm" and "weight" not in a[field]["options"]
    assert a[field]["options"]["memory_batches"] == 25  # XBM's own options are all there


def _run(tmp_path, name, loss, make_config):
    config = make_config(name=name, loss=loss, schedule={"max_steps": 2}, evaluation={"every": 2})
    train(load_config(config))
    return tmp_path / "runs" / name


def _as_written_before(run):
    """``run``'s components.json as the earlier version wrote it for the named form."""
    path = run / "components.json"
    record = json.loads(path.read_text())
    record["loss[1]"]["options"]["weight"] = 0.5
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def test_diff_of_the_two_forms_and_of_an_earlier_record_shows_no_weight(tmp_path, make_config):
    named = _run(tmp_path, "named", NAMED, make_config)
    by_name = _run(tmp_path, "by_name", BY_NAME, make_config)
    assert diff_runs(named, by_name)["components"] == {}
    _as_written_before(named)
    assert diff_runs(named, by_name)["components"] == {}
    assert "loss[1].weight" not in diff_text(diff_runs(named, by_name))
    # a real change of XBM's options is still shown, under its config key
    record = json.loads((named / "components.json").read_text())
    record["loss[1]"]["options"]["memory_batches"] = 7
    (named / "components.json").write_text(json.dumps(record))
    assert diff_runs(named, by_name)["components"] == {"loss[1].memory_batches": (7, 25)}


def test_a_run_recorded_the_earlier_way_resumes(tmp_path, make_config):
    config = load_config(
        make_config(name="old", loss=NAMED, schedule={"max_steps": 4}, evaluation={"every": 2})
    )
    train(config)
    run = tmp_path / "runs" / "old"
    _as_written_before(run)
    (run / "results.json").unlink()  # killed after its last checkpoint: resumable
    assert train(config, resume=True)["steps"] == 4
    # the check still refuses an option that differs
    record = json.loads((run / "components.json").read_text())
    record["loss[1]"]["options"]["memory_batches"] = 7
    (run / "components.json").write_text(json.dumps(record))
    (run / "results.json").unlink()
    with pytest.raises(ConfigError, match=r"--resume: .*loss\[1\]\.memory_batches: 7 -> 25"):
        train(config, resume=True)
