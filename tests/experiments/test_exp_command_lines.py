"""Every experiment script accepts the options ``run_all.py`` passes to all of them."""

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))

import run_all  # noqa: E402

SCRIPTS = run_all.discover()


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_accepts_the_options_of_run_all(name, tmp_path):
    spec = importlib.util.spec_from_file_location(f"exp_cli_{name}", SCRIPTS[name])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    command = run_all.command(SCRIPTS[name], tmp_path, smoke=True, threads=1)[2:]  # without python and the script
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit) as exit_:
        module.main([*command, "--help"])
    assert exit_.value.code == 0
    for option in command:
        if option.startswith("--"):
            assert option in text.getvalue(), (name, option)
