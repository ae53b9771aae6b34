"""One run per folder: no command writes a run into a folder holding another's files, and a
run is read back only with the weights and config its results.json describes."""

from __future__ import annotations

import json

import pytest

from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.file_digest import file_sha256
from gspdml.training import load_run, train
from gspdml.training.checkpoint import save_state
from gspdml.training.run_dir import read_weights
from gspdml.workflows.protocol import run_protocol


def test_a_run_folder_is_never_mixed_with_another_runs_files(make_config, tmp_path):
    config = load_config(make_config(schedule={"max_steps": 2}, evaluation={"every": 2}))
    run = tmp_path / "runs" / "tiny"
    train(config)
    results = json.loads((run / "results.json").read_text())
    assert results["weights_sha256"] == file_sha256(run / "model.safetensors")
    assert results["config_sha256"] == file_sha256(run / "config.yaml")
    load_run(run)  # its own files: read back

    # a protocol whose root is this run folder is refused before it writes anything
    with pytest.raises(ConfigError, match=r"output_dir: .*tiny holds a run \(config.yaml"):
        run_protocol(config, "conventional", seeds=[0], output_dir=run)
    assert json.loads((run / "results.json").read_text()) == results

    # weights or a config other than results.json describes are refused (the issue: a
    # protocol's results.json beside an older run's weights, which evaluate then scored)
    saved = (run / "model.safetensors").read_bytes()
    state, meta = read_weights(run / "model.safetensors")
    first = next(iter(state))
    save_state(run / "model.safetensors", {**state, first: state[first] + 1}, meta)
    with pytest.raises(ConfigError, match="model.safetensors is not the model"):
        load_run(run)
    (run / "model.safetensors").write_bytes(saved)
    (run / "results.json").write_text(json.dumps({"tiny": {"summary": {}}}))
    with pytest.raises(ConfigError, match="is not this run.s results but a table"):
        load_run(run)
    (run / "results.json").write_text(json.dumps(results))
    with open(run / "config.yaml", "a") as handle:
        handle.write("# edited\n")
    with pytest.raises(ConfigError, match="config.yaml is not the config"):
        load_run(run)

    # a run is not started in a folder holding a protocol's table or another run's results
    other = tmp_path / "protocol"
    other.mkdir()
    (other / "protocol.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"holds another run's files \(protocol.json\)"):
        train(config, run_dir=other)
    (run / "checkpoints" / "last.safetensors").unlink()  # no resume possible: a finished run
    with pytest.raises(ConfigError, match=r"holds another run's files \(results.json, model"):
        train(config)
