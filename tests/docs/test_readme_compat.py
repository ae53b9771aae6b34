"""The README's "Coming from pytorch-metric-learning or open-metric-learning" block runs as
written, and its drop-in calls give the peer's numbers (PML is installed for the tests)."""

import re
from pathlib import Path

import torch
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

ROOT = Path(__file__).resolve().parents[2]


def test_coming_from_pml_or_oml_block_runs(capsys):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Coming from pytorch-metric-learning or open-metric-learning")[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    torch.manual_seed(0)
    exec(compile(code, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "'cmc/1'" in printed and "'map/3'" in printed
    emb, labels = namespace["emb"], namespace["labels"]
    ours = namespace["calculator"].get_accuracy(emb, labels)
    theirs = AccuracyCalculator(
        include=("mean_average_precision", "precision_at_1"), k=10, device=torch.device("cpu")
    ).get_accuracy(emb, labels)
    assert ours.keys() == theirs.keys()
    assert all(abs(ours[k] - theirs[k]) < 1e-6 for k in ours)
