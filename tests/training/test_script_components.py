"""A component defined in a script run as a program has the module ``__main__``, which a new
process cannot import back: training warns once, naming the class and the script; reading the run
back in another process is a ``gspdml: error`` naming the component, ``__main__`` and the fix,
without running the script; importing the script's module before loading is that fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gspdml.errors import ConfigError
from gspdml.pooling import POOLINGS
from gspdml.training.run_plugins import require_script_components
from tests.cli.test_cli_plugins import POOLING
from tests.helpers.images import folder_config, image_folder

REPO = Path(__file__).resolve().parents[2]
#: the script: a pooling of its own, a mark that it ran, a run trained with that pooling and the
#: record of a second run (what its training would write)
SCRIPT = f"""
from pathlib import Path
Path(__file__).with_suffix(".ran").touch()
{POOLING}

if __name__ == "__main__":
    import json, sys
    from gspdml.config import load_config
    from gspdml.training import train
    from gspdml.training.run_plugins import recorded_plugins

    config = load_config(json.loads(sys.argv[1]))
    train(config, Path(config.output_dir) / "first")
    recorded_plugins(config)
"""


def _python(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_a_script_component_warns_at_training_and_is_refused_by_a_new_process(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    script = folder / "own_script.py"
    script.write_text(SCRIPT)
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    raw = folder_config(root, tmp_path / "runs")
    raw["model"]["pooling"] = "lt_attn"
    raw["trainer"] |= {"tensorboard": False}

    trained = _python(str(script), json.dumps(raw), cwd=folder)
    assert trained.returncode == 0, trained.stderr
    warned = [line for line in trained.stderr.splitlines() if "UserWarning" in line]
    assert len(warned) == 1, trained.stderr  # once, for two runs
    assert "LearnedTokenAttention" in warned[0] and str(script) in warned[0]
    run = tmp_path / "runs" / "first"
    (record,) = json.loads((run / "environment.json").read_text())["plugins"]
    assert record["module"] == "__main__" and record["file"] == str(script)
    assert record["components"] == [
        {
            "field": "model.pooling",
            "kind": "pooling",
            "name": "lt_attn",
            "class": "LearnedTokenAttention",
        }
    ]

    script.with_suffix(".ran").unlink()
    refused = _python("-m", "gspdml", "evaluate", str(run), cwd=folder)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    error = refused.stderr.strip().splitlines()[-1]
    assert error.startswith(f"gspdml: error: {run / 'environment.json'}: ")
    for part in ("model.pooling 'lt_attn'", "LearnedTokenAttention", str(script), "'__main__'"):
        assert part in error
    assert "move LearnedTokenAttention to a module" in error and "import the module" in error
    assert not script.with_suffix(".ran").exists()  # the script was not run

    load = (
        f"import own_script; from gspdml.training.run_dir import load_run; load_run({str(run)!r})"
    )
    assert _python("-c", load, cwd=folder).returncode == 0  # the fix: import it first


def test_a_script_component_registered_as_another_class_is_refused():
    record = {
        "module": "__main__",
        "file": "/work/own_script.py",
        "components": [
            {"field": "model.pooling", "kind": "pooling", "name": "gem", "class": "MyGeM"}
        ],
    }
    with pytest.raises(ConfigError, match=r"is gspdml\.pooling\.\S+\.GeM in this process"):
        require_script_components([record], "environment.json")
    record["components"][0]["class"] = POOLINGS.get("gem").__qualname__
    require_script_components([record], "environment.json")  # the recorded class: accepted
