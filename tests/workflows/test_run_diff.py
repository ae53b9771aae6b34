"""``gspdml diff RUN_A RUN_B``: config keys, resolved component options, environment, data and
test metrics that differ."""

from __future__ import annotations

import json
import shutil

import yaml

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.training import train
from tests.training.conftest import tiny_config


def test_diff_names_every_differing_key(tmp_path, capsys):
    config = load_config(tiny_config(tmp_path, schedule={"max_steps": 2}, evaluation={"every": 2}))
    train(config)
    a = tmp_path / "runs" / "tiny"
    b = tmp_path / "runs" / "other"
    shutil.copytree(a, b)
    saved = yaml.safe_load((b / "config.yaml").read_text())
    saved["loss"]["neg_margin"] = 0.4
    (b / "config.yaml").write_text(yaml.safe_dump(saved))
    components = json.loads((b / "components.json").read_text())
    components["loss"]["options"]["pos_margin"] = 0.1  # a default that changed
    (b / "components.json").write_text(json.dumps(components))
    environment = json.loads((b / "environment.json").read_text())
    environment["threads"]["torch_intra_op"] = 7
    (b / "environment.json").write_text(json.dumps(environment))
    results = json.loads((b / "results.json").read_text())
    before = results["test"]["map_at_r"]
    results["test"]["map_at_r"] = before + 0.25
    (b / "results.json").write_text(json.dumps(results))

    assert main(["diff", str(a), str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "config: loss.neg_margin: 0.5 -> 0.4 (-0.1)" in lines
    assert "components: loss.pos_margin: 0.0 -> 0.1 (+0.1)" in lines  # its config key
    assert any(
        line.startswith("environment: threads.torch_intra_op: ") and "-> 7" in line
        for line in lines
    )
    assert "data: same" in lines
    assert f"results: map_at_r: {before!r} -> {before + 0.25!r} (+0.25)" in lines
    (b / "data.json").unlink()
    assert main(["diff", str(a), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"] == "data.json missing in B"
