"""experiments/backward_cost (seed 000 supplement §1.5, Fig. 7; spec §8 E4), smoke run."""

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
