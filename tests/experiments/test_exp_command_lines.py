"""Every experiment script accepts the options ``run_all.py`` passes to all of them."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))

import run_all  # noqa: E402

# In a separate process: some scripts register components when they are imported, which the
# smoke tests of this session import again.
PROGRAM = """
import contextlib, importlib.util, io, json, sys
result = {}
for name, path, command in json.loads(sys.argv[1]):
    spec = importlib.util.spec_from_file_location("exp_cli_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
            module.main([*command, "--help"])
        code = None
    except SystemExit as exit_:
        code = exit_.code
    result[name] = {"code": code, "help": text.getvalue()}
print(json.dumps(result))
"""


def test_every_script_accepts_the_options_of_run_all(tmp_path):
    scripts = run_all.discover()
    jobs = [
        (name, str(path), run_all.command(path, tmp_path, smoke=True, threads=1)[2:])
        for name, path in scripts.items()
    ]
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(jobs)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": ":".join(sys.path), "MPLBACKEND": "Agg"},
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(result) == sorted(scripts)
    for name, _, command in jobs:
        assert result[name]["code"] == 0, (name, result[name]["help"][-500:])
        for option in (o for o in command if o.startswith("--")):
            assert option in result[name]["help"], (name, option)
