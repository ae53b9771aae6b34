"""experiments/gsp_m_eps_grid (GSP paper supplement §1.6, Table 5, Fig. 8a): main effects against a
hand computation, the two verdict rules on hand-made grids, and the smoke run's table."""

import json

import numpy as np
import pytest

from tests.helpers.experiments import load_experiment

grid = load_experiment("gsp_m_eps_grid")
MS, EPSS = [16, 64, 128], [0.5, 5.0, 20.0]


def entry(*values):
    return {
        "map_at_r": {
            "values": list(values),
            "mean": float(np.mean(values)),
            "std": float(np.std(values, ddof=1)),
        },
        "failed": {},
    }


def table(means, spread=1.0):
    """A 3 x 3 grid (rows m, columns ε) of three-seed entries with the given means and std ``spread``."""
    return {
        grid.label(m, e): entry(mean - spread, mean, mean + spread)
        for m, row in zip(MS, means)
        for e, mean in zip(EPSS, row)
    }


def test_table5_main_effects_by_hand():
    effects = grid.table5_effects()
    # ε = 0.5 rows: 40.63, 40.41, 40.22, 40.07; ε = 20 rows: 36.11, 39.11, 39.61, 35.36
    assert effects["eps"] == pytest.approx(
        (40.63 + 40.41 + 40.22 + 40.07) / 4 - (36.11 + 39.11 + 39.61 + 35.36) / 4
    )
    # m = 16 rows: 40.63, 40.41, 36.11, 39.11; m = 128 rows: 40.22, 40.07, 39.61, 35.36
    assert effects["m"] == pytest.approx(
        (40.63 + 40.41 + 36.11 + 39.11) / 4 - (40.22 + 40.07 + 39.61 + 35.36) / 4
    )


def test_main_effects_of_an_additive_grid_are_the_ranges_of_its_terms():
    a, b = {16: 0.0, 64: 0.3, 128: 0.1}, {0.5: 20.0, 5.0: 30.0, 20.0: 25.0}
    effects = grid.main_effects({(m, e): a[m] + b[e] for m in MS for e in EPSS})
    assert effects == pytest.approx({"m": 0.3, "eps": 10.0})


def test_screening_rule():
    ours, verdict = grid.eps_over_m(
        table([[20, 30, 25], [20.3, 30.3, 25.3], [20.1, 30.1, 25.1]]), MS, EPSS
    )
    assert (
        verdict == "reproduced"
        and ours == "main effect of ε 10.00, of m 0.30 (mean seed std of the cells 1.00)"
    )
    assert grid.eps_over_m(table([[20, 30, 25], [22, 32, 27], [20, 30, 25]]), MS, EPSS)[
        1
    ].startswith("partly")
    assert grid.eps_over_m(table([[20, 21, 20], [30, 31, 30], [25, 26, 25]]), MS, EPSS)[
        1
    ].startswith("not reproduced")


def test_best_cell_rule():
    ours, verdict = grid.best_cell(table([[20, 30, 25], [20, 40, 25], [20, 30, 25]]))
    assert (
        verdict == "reproduced"
        and ours == "m=64 eps=5: 40.00 ± 1.00; best cell m=64 eps=5: 40.00 ± 1.00"
    )
    assert grid.best_cell(table([[20, 30, 25], [20, 31, 25], [20, 30, 25]]))[1].startswith("partly")
    ours, verdict = grid.best_cell(table([[20, 30, 25], [20, 31, 25], [20, 30, 35]]))
    assert verdict == "not reproduced (m=128 eps=20 as high or higher)" and ours.endswith(
        "best cell m=128 eps=20: 35.00 ± 1.00"
    )


def test_smoke_run_tabulates_the_grid(tmp_path):
    payload = grid.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    ms, epss = grid.SMOKE["ms"], grid.SMOKE["epss"]
    lines = saved["table"].splitlines()
    assert lines[0] == "| m \\ ε (test MAP@R %) | " + " | ".join(f"{e:g}" for e in epss) + " |"
    assert [line.split(" | ")[0].lstrip("| ") for line in lines[2:]] == [str(m) for m in ms]
    for m in ms:
        for e in epss:
            config = (tmp_path / f"m{m}_eps{e:g}" / "seed0" / "config.yaml").read_text()
            assert (
                f"num_prototypes: {m}" in config and f"eps: {e}" in config and "mu: 0.2" in config
            )
            assert 0.0 <= payload["results"][grid.label(m, e)]["map_at_r"]["mean"] <= 100.0
    rows = grid.reproduction({"frozen": saved})
    assert [row["claim"] for row in rows] == [
        "ε has the largest effect, m no significant one",
        "with C2 the best cell is m = 64, ε = 5",
    ]
    assert rows[0]["paper"].endswith(
        "main effect of ε 2.78, of m 0.25"
    )  # 2.785 in binary floating point
