"""experiments/run_all.py: finds every experiment script and passes --smoke through."""

import importlib.util

from tests.helpers.experiments import EXPERIMENTS

spec = importlib.util.spec_from_file_location("exp_run_all", EXPERIMENTS / "run_all.py")
run_all = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_all)


def test_discovers_every_experiment_script():
    found = run_all.discover()
    assert {"collage", "pooling_comparison", "proxynca_temperature", "metrix_mixup"} <= set(found)
    assert all(path.name == "run.py" and path.parent.name == name for name, path in found.items())
    assert list(found) == sorted(found)


def test_runs_each_script_with_smoke_and_reports_failures(monkeypatch, tmp_path, capsys):
    calls = []

    def fake_call(args):
        calls.append(args)
        return 3 if "metrix_mixup" in args[1] else 0

    monkeypatch.setattr(run_all.subprocess, "call", fake_call)
    status = run_all.main(
        ["--smoke", "--out", str(tmp_path), "--only", "collage", "metrix_mixup", "--threads", "2"]
    )
    assert status == 1
    assert [args[1] for args in calls] == [
        str(EXPERIMENTS / "collage" / "run.py"),
        str(EXPERIMENTS / "metrix_mixup" / "run.py"),
    ]
    assert calls[0][2:] == ["--out", str(tmp_path / "collage"), "--smoke", "--threads", "2"]
    assert "metrix_mixup FAILED (exit status 3)" in capsys.readouterr().out
    calls.clear()
    assert run_all.main(["--out", str(tmp_path), "--only", "collage"]) == 0
    assert "--smoke" not in calls[0]
