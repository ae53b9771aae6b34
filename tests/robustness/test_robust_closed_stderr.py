"""Machine-readable output stays clean with stderr closed (issue 39, defect 11).

Python starts with ``sys.stderr = None`` when file descriptor 2 is closed (``2>&-``); progress
lines written with ``tqdm.write(file=None)`` (``file=sys.stderr``) then went to stdout and broke
``--json`` output and the one-line summaries. Progress goes to stderr or nowhere.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from gspdml.cli import main
from gspdml.progress import Progress
from tests.helpers.retrieval import write_image_folder, write_run

ROOT = Path(__file__).resolve().parents[2]


def _gspdml_without_stderr(*args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "OMP_NUM_THREADS": "1",
        "GSPDML_PROGRESS_SECONDS": "0",  # a progress line at every update
    }
    return subprocess.run(
        [sys.executable, "-m", "gspdml", *args],
        env=env,
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.close(2),  # as `gspdml ... 2>&-`
        text=True,
        timeout=120,
    )


def test_progress_lines_never_reach_stdout_with_stderr_closed(tmp_path, capsys):
    """``gspdml index`` embeds a folder (progress lines) in a process started with stderr
    closed; its index then answers a ``--json`` search with nothing but the JSON on stdout."""
    write_run(tmp_path / "run")
    images = write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=3)
    index = _gspdml_without_stderr(
        "index", str(tmp_path / "run"), str(tmp_path / "images"), "--out", str(tmp_path / "idx")
    )
    assert index.returncode == 0
    assert "embedding" not in index.stdout and "gspdml:" not in index.stdout, index.stdout
    # the search of one image prints no progress line and nothing else on stderr: in this process
    capsys.readouterr()
    assert main(["search", str(tmp_path / "idx"), str(images[0]), "--json", "-k", "2"]) == 0
    answer = json.loads(capsys.readouterr().out)  # parses: nothing but the JSON on stdout
    assert answer


def test_a_progress_meter_without_stderr_writes_nothing(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stderr", None)
    meter = Progress("embedding 4 images", 4, "images", interval=0.0)
    meter.update(2)
    meter.close()
    assert capsys.readouterr().out == ""
