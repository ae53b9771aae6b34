"""Every experiment script accepts the options ``run_all.py`` passes to all of them."""

import sys
from pathlib import Path

from tests.experiments.scripts_in_process import run_script

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))

import run_all  # noqa: E402


def test_every_script_accepts_the_options_of_run_all(tmp_path):
    """Each script's ``--help`` after the options (each script imported afresh, in this process:
    :mod:`tests.experiments.scripts_in_process`) exits 0 and names every option."""
    scripts = run_all.discover()
    assert scripts
    for name, path in scripts.items():
        command = run_all.command(path, tmp_path, smoke=True, threads=1)[2:]
        _, code, text = run_script(name, [*command, "--help"])
        assert code == 0, (name, text[-500:])
        for option in (o for o in command if o.startswith("--")):
            assert option in text, (name, option)
