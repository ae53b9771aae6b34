"""The README's Python quick start runs as written, from a scratch directory (presets by name)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_python_quick_start_runs(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert (tmp_path / "runs" / "scratch" / "gsp" / "model.safetensors").exists()
    assert 0.0 < namespace["results"]["test"]["map_at_r"] <= 1.0
    assert namespace["out"].weights.shape == (4, 8, 8) and namespace["rho"].shape == (2, 49)
