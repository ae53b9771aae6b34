"""``gspdml compare``: one table across methods, paired by (fold, seed), checked against scipy."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import yaml
from scipy import stats

from gspdml.cli import main

FOLDS, SEEDS = range(4), (0, 1)
RNG = np.random.default_rng(7)
GAP = {(f, s): 0.30 + 0.03 * RNG.standard_normal() for f in FOLDS for s in SEEDS}
GSP = {key: value + 0.01 + 0.03 * RNG.standard_normal() for key, value in GAP.items()}


def protocol_folder(root, values, extra=()):
    """A fair-protocol folder as ``gspdml protocol fair`` writes it: protocol.json's per-model
    metrics and each model's config.yaml."""
    per_model = {}
    for (fold, seed), value in values.items():
        name = f"fold{fold}-seed{seed}"
        (root / name).mkdir(parents=True)
        config = {"seed": seed, "data": {"dataset": {"name": "x", "val_fold": fold}}}
        (root / name / "config.yaml").write_text(yaml.safe_dump(config))
        per_model[name] = {"precision_at_1": value + 0.2, "map_at_r": value}
    (root / "protocol.json").write_text(json.dumps({"protocol": "fair", "per_model": per_model}))
    return root


def test_compare_pairs_by_fold_and_seed_and_matches_scipy(tmp_path, capsys):
    gap = protocol_folder(tmp_path / "gap", GAP)
    gsp = protocol_folder(tmp_path / "gsp", GSP)
    out = tmp_path / "tables" / "gap-vs-gsp"
    assert main(["compare", str(gap), str(gsp), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.with_suffix(".json").read_text())
    keys = sorted(GAP)
    a = [GAP[k] for k in keys]
    b = [GSP[k] for k in keys]
    row = next(r for r in result["rows"] if r["method"] == "gsp" and r["metric"] == "map_at_r")
    ttest, wilcoxon = stats.ttest_rel(b, a), stats.wilcoxon(b, a)
    assert row["tests"]["t_test"]["p"] == pytest.approx(ttest.pvalue, rel=1e-9)
    low, high = ttest.confidence_interval(0.95)
    assert row["tests"]["t_test"]["ci_low"] == pytest.approx(low, rel=1e-9)
    assert row["tests"]["t_test"]["ci_high"] == pytest.approx(high, rel=1e-9)
    assert row["tests"]["wilcoxon"]["p"] == pytest.approx(wilcoxon.pvalue, rel=1e-9)
    assert row["summary"]["std"] == pytest.approx(np.std(b, ddof=1))
    assert row["models"] == 8 and len(row["pairs"]) == 8
    # the Markdown (printed and written), the LaTeX and the CSV carry the same numbers
    line = next(line for line in printed.splitlines() if line.startswith("| gsp | MAP@R"))
    assert f"{100 * np.mean(np.subtract(b, a)):+.2f}" in line
    assert f"[{100 * low:+.2f}, {100 * high:+.2f}]" in line
    assert f"{ttest.pvalue:.3g}" in line and f"{wilcoxon.pvalue:.3g}" in line
    assert "paired t-test" in printed and "Wilcoxon signed-rank" in printed
    assert out.with_suffix(".md").read_text() == printed.split("wrote ")[0]
    tex = out.with_suffix(".tex").read_text()
    assert tex.startswith(r"\begin{tabular}") and r"$\pm$" in tex and "gsp & MAP@R" in tex
    table = list(csv.DictReader(out.with_suffix(".csv").open()))
    gsp_map = next(r for r in table if r["method"] == "gsp" and r["metric"] == "map_at_r")
    assert float(gsp_map["t_p"]) == pytest.approx(ttest.pvalue, rel=1e-9)
    assert float(gsp_map["wilcoxon_p"]) == pytest.approx(wilcoxon.pvalue, rel=1e-9)
    baseline = next(r for r in table if r["method"] == "gap")
    assert baseline["t_p"] == "" and baseline["pairs"] == ""


def test_compare_uses_only_common_models_and_refuses_unpaired_methods(tmp_path, capsys):
    gap = protocol_folder(tmp_path / "gap", GAP)
    fewer = {k: v for k, v in GSP.items() if k[1] == 0}  # one seed only: 4 pairs
    gsp = protocol_folder(tmp_path / "gsp", fewer)
    assert main(["compare", str(gap), str(gsp), "--names", "GAP", "GSP"]) == 0
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if line.startswith("| GSP | MAP@R"))
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[3] == "4" and cells[-1] == "–"  # Wilcoxon needs 6 non-zero pairs
    other = protocol_folder(tmp_path / "other", {(f, 5): 0.3 for f in FOLDS})
    assert main(["compare", str(gap), str(other)]) == 2
    assert "share 0 (fold, seed) models" in capsys.readouterr().err


def test_compare_reads_run_folders_and_names_a_wrong_folder(tmp_path, capsys):
    runs = tmp_path / "sweep"
    for seed, value in enumerate((0.3, 0.32, 0.31)):
        run = runs / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "data": {"dataset": {}}}))
        (run / "results.json").write_text(json.dumps({"test": {"map_at_r": value}}))
    assert (
        main(
            [
                "compare",
                str(runs),
                str(runs / "seed0"),
                "--names",
                "a",
                "b",
                "--metrics",
                "map_at_r",
            ]
        )
        == 2
    )
    assert "share 1 (fold, seed) models" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "nothing")]) == 2
    assert "neither a protocol folder" in capsys.readouterr().err
