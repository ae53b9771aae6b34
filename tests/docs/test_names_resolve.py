"""Every module, attribute and file the repository's text names exists.

A move or rename (``gspdml.evaluation.knn`` → ``gspdml.evaluation.exact_knn``, a test that changes
package) leaves stale names behind in docstrings, docs and the README; this scan finds them. It
reads every tracked ``.md`` and ``.py`` file and checks three kinds of names: dotted Python names
under ``gspdml`` (imported, then followed attribute by attribute), ``src/gspdml/...`` paths and
``tests/...py`` paths.
"""

import importlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOTTED = re.compile(r"(?<![\w./-])gspdml(?:\.[A-Za-z_][A-Za-z0-9_]*)+")  # not a file's name
PATHS = re.compile(r"\b(?:src/gspdml|tests)/[\w/]+\.\w+")
SKIP = {"tests/docs/test_names_resolve.py"}  # this file's own bad examples


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md", "*.py"], cwd=ROOT, capture_output=True, text=True
    )
    if listed.returncode != 0:
        pytest.fail(f"git ls-files failed in {ROOT}: {listed.stderr.strip()}")
    return [ROOT / name for name in listed.stdout.split() if name not in SKIP]


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module of gspdml or an attribute path below one."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attr in parts[split:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def stale_names(text: str) -> set[str]:
    """The names in ``text`` that do not resolve (dotted names, then paths from the repo root)."""
    stale = {name for name in DOTTED.findall(text) if not resolves(name)}
    return stale | {path for path in PATHS.findall(text) if not (ROOT / path).exists()}


def test_the_scan_flags_moved_names():
    text = (
        "see gspdml.evaluation.knn.retrieve, gspdml.pooling.gsp.transport.partial_transport, "
        "gspdml.retrieval.knn, src/gspdml/pooling/partial_transport.py and tests/gsp/test_gsp_layer.py"
        " (RUN/.gspdml.lock and ~/.gspdml.cache are file names, not modules)"
    )
    assert stale_names(text) == {
        "gspdml.evaluation.knn.retrieve",
        "gspdml.retrieval.knn",
        "src/gspdml/pooling/partial_transport.py",
        "tests/gsp/test_gsp_layer.py",
    }


def test_every_name_in_the_repository_resolves():
    stale = {}
    for path in _tracked_text_files():
        for name in stale_names(path.read_text(encoding="utf-8")):
            stale.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert not stale, "names that no longer exist:\n" + "\n".join(
        f"{k}: {', '.join(v)}" for k, v in sorted(stale.items())
    )
