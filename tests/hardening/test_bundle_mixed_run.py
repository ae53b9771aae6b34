"""``gspdml bundle`` of a run folder whose final weights are not those its ``results.json``
describes (another run's ``model.safetensors`` copied in) is refused, as ``load_run`` refuses
it. Before, the bundle's model card and ``bundle.json`` stated the run's test metrics for the
other weights: silently wrong numbers on a model card."""

import json
import shutil

import pytest

from gspdml.errors import ConfigError
from gspdml.file_digest import file_sha256
from gspdml.retrieval.bundle import write_bundle
from tests.helpers.retrieval import write_run


def _finished(run_dir, seed):
    write_run(run_dir, seed=seed)
    record = {
        "test": {"map_at_r": 0.9},
        "weights_sha256": file_sha256(run_dir / "model.safetensors"),
        "config_sha256": file_sha256(run_dir / "config.yaml"),
    }
    (run_dir / "results.json").write_text(json.dumps(record))
    return run_dir


def test_a_run_holding_another_runs_weights_is_not_bundled(tmp_path):
    run = _finished(tmp_path / "run", seed=0)
    other = _finished(tmp_path / "other", seed=1)
    shutil.copyfile(other / "model.safetensors", run / "model.safetensors")
    with pytest.raises(
        ConfigError, match=r"model\.safetensors is not the model that .*results\.json"
    ):
        write_bundle(run, tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()


def test_a_consistent_run_is_bundled_with_its_metrics(tmp_path):
    run = _finished(tmp_path / "run", seed=0)
    write_bundle(run, tmp_path / "bundle")
    info = json.loads((tmp_path / "bundle" / "bundle.json").read_text())
    assert info["metrics"] == {"map_at_r": 0.9}
    assert info["weights"] == file_sha256(run / "model.safetensors")


def test_best_weights_of_another_model_are_not_bundled(tmp_path):
    """``gspdml bundle --weights best`` of a run whose best weights are another model's: the
    bundle would carry a config.yaml and a model card of the run, and the other weights."""
    run = _finished(tmp_path / "run", seed=0)
    other = tmp_path / "other"
    write_run(other, pooling="gem")
    (run / "checkpoints").mkdir()
    shutil.copyfile(other / "model.safetensors", run / "checkpoints" / "best.safetensors")
    with pytest.raises(ConfigError, match=r"best\.safetensors holds the weights of another model"):
        write_bundle(run, tmp_path / "bundle", weights="best")
    assert not (tmp_path / "bundle").exists()
