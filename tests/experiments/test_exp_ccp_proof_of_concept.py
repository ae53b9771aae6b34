"""Smoke run of experiments/ccp_proof_of_concept: metrics per CCP problem, k-center proxies cover
the classes more tightly than a single proxy (Corollary 3.2.2.1)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ccp_proof_of_concept_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "exp_ccp_poc", ROOT / "experiments" / "ccp_proof_of_concept" / "run.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--smoke", "--out", str(tmp_path)])
    assert (tmp_path / "results.json").is_file() and (
        tmp_path / "ccp_iterations.png"
    ).stat().st_size > 10_000
    ccp = results["per_seed"][0]["ccp"]
    assert [row["problem"] for row in ccp] == list(range(results["settings"]["ccp_problems"]))
    assert ccp[0] == results["per_seed"][0]["proxy"][0]  # CCP starts from the single-proxy solution
    for row in ccp + results["per_seed"][0]["sample"]:
        assert 0.0 <= row["map_at_r"] <= 1.0
        assert 0.0 <= row["avg_cover_radius"] <= 2.0 and 0.0 < row["inter_class_distance"] <= 2.0
    assert ccp[1]["proxy_cover_radius"] < ccp[0]["proxy_cover_radius"]
    # the published rows: one table line per CCP problem, and verdicts by the experiments' rule
    summary = results["summary"]
    table = module.summary_table(summary)
    assert table.count("\n") == 2 + len(
        summary["ccp"]
    )  # header, rule, single proxy, CCP problems 1.., sample
    [row] = module.reproduction({"digits": {"summary": summary}})
    means = " → ".join(f"{r['map_at_r']['mean']:.3f}" for r in summary["ccp"])
    assert row["ours"].startswith(f"MAP@R {means} over problems 0-{len(summary['ccp']) - 1}")
    assert (
        row["verdict"].startswith("CCP > single proxy: ")
        and "; CCP ≥ sample-based: " in row["verdict"]
    )
