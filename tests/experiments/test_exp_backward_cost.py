"""experiments/backward_cost (GSP paper supplement §1.5, Fig. 7; Gürbüz thesis Fig. 5.9): smoke run, and the
time and memory verdict rules on hand-made measurements."""

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.backward_cost import run as backward_cost  # noqa: E402


def test_smoke_run_memory_of_the_closed_form_does_not_grow_with_iterations(tmp_path):
    backward_cost.main(["--smoke", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["iters"] == [2, 8]
    closed, unrolled = results["gsp"]["closed_form"], results["gsp"]["unrolled"]
    assert [r["iters"] for r in closed] == [r["iters"] for r in unrolled] == [2, 8]
    for row in closed + unrolled + [results["gap"]]:
        assert math.isfinite(row["ms_mean"]) and row["ms_mean"] > 0 and row["mib"] >= 0
    # only (rho, pi) are saved by the closed form; autograd keeps every iteration
    assert closed[0]["mib"] == closed[1]["mib"]
    assert unrolled[1]["mib"] > unrolled[0]["mib"] > closed[0]["mib"]
    assert [line.split(" | ")[0].lstrip("| ") for line in results["table"].splitlines()[2:]] == [
        "2",
        "8",
        "GAP",
    ]
    rows = backward_cost.reproduction({"cpu": {**results, "plan": {"iters": results["iters"]}}})
    assert rows[1]["verdict"] == "reproduced" and rows[1]["ours"].startswith(
        "k = 2 → 8: closed form"
    )


def measurements(closed_ms, unrolled_ms, closed_mib=(0.4, 0.4, 0.4), unrolled_mib=(2.0, 2.2, 2.5)):
    def rows(ms, mib):
        return [
            {"iters": k, "ms_mean": t, "ms_std": 0.1, "mib": m}
            for k, t, m in zip((10, 50, 200), ms, mib)
        ]

    return rows(closed_ms, closed_mib), rows(unrolled_ms, unrolled_mib)


def test_time_rule():
    assert (
        backward_cost.time_verdict(*measurements((2.0, 2.1, 2.2), (3.0, 5.0, 10.0))) == "reproduced"
    )
    assert backward_cost.time_verdict(*measurements((2.0, 2.1, 2.2), (3.0, 4.0, 5.0))).startswith(
        "partly (autodiff grows less"
    )
    assert backward_cost.time_verdict(*measurements((2.0, 3.0, 4.0), (3.0, 5.0, 10.0))).startswith(
        "partly (the closed form grows"
    )
    assert backward_cost.time_verdict(*measurements((2.0, 3.0, 4.0), (3.0, 3.0, 3.0))).startswith(
        "not reproduced"
    )


def test_memory_rule():
    assert backward_cost.memory_verdict(*measurements((2, 2, 2), (3, 5, 10))) == "reproduced"
    assert backward_cost.memory_verdict(
        *measurements((2, 2, 2), (3, 5, 10), closed_mib=(0.4, 0.4, 0.5))
    ).startswith("partly")
    assert backward_cost.memory_verdict(
        *measurements((2, 2, 2), (3, 5, 10), unrolled_mib=(2, 2, 2))
    ).startswith("partly")
    assert (
        backward_cost.memory_verdict(
            *measurements((2, 2, 2), (3, 5, 10), (0.4, 0.5, 0.6), (2, 2, 2))
        )
        == "not reproduced"
    )
