"""scripts/readme_tables.py: the README's demo and Reproductions tables come from result files."""

import importlib.util
import json
from pathlib import Path

import pytest

from gspdml.workflows.reproduce import TABLES

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "readme_tables.py"
spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
readme_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_tables)

ROW = {
    "experiment": "Collage, frozen",
    "claim": "GSP > GAP",
    "paper": "+17",
    "ours": "GSP 60.00 ± 1.00",
    "verdict": "reproduced",
}


@pytest.fixture
def tree(tmp_path):
    experiments = tmp_path / "experiments"
    for name in ("collage", "metrix_mixup"):
        (experiments / name).mkdir(parents=True)
        (experiments / name / "run.py").write_text("")
    (experiments / "collage" / "results.json").write_text(
        json.dumps(
            {
                "runs": {
                    "frozen": {
                        "plan": {"seeds": [0, 1, 2]},
                        "seconds": 12.3,
                        "threads": 1,
                        "table": "| method | MAP@R |\n|---|---|\n| gsp | 60.00 ± 1.00 |",
                    }
                },
                "reproduction": [ROW],
            }
        )
    )
    (experiments / "collage" / "README.md").write_text(
        "# Collage\n<!-- results -->\nold\n<!-- /results -->\nend\n"
    )
    demo = tmp_path / "summary.json"
    demo.write_text(
        json.dumps(
            [
                {
                    "method": "gap",
                    "steps": 300,
                    "seconds": 10.0,
                    "target_share": None,
                    "test": {"map_at_r": 0.07},
                },
                {
                    "method": "gsp",
                    "steps": 250,
                    "seconds": 20.0,
                    "target_share": 0.81,
                    "test": {"map_at_r": 0.55},
                },
            ]
        )
    )
    readme = tmp_path / "README.md"
    readme.write_text(
        "intro\n<!-- demo-table -->\ntyped by hand\n<!-- /demo-table -->\nmiddle\n"
        "<!-- reproductions-table -->\nold\n<!-- /reproductions-table -->\n"
        "<!-- reproduce-tables -->\nold list\n<!-- /reproduce-tables -->\nend\n"
    )
    return tmp_path, [
        "--readme",
        str(readme),
        "--demo",
        str(demo),
        "--experiments",
        str(experiments),
    ]


def test_tables_are_generated_and_check_tells_stale_from_current(tree, capsys):
    root, args = tree
    assert readme_tables.main([*args, "--check"]) == 1
    assert readme_tables.main(args) == 0
    text = (root / "README.md").read_text()
    assert "typed by hand" not in text and text.startswith(
        "intro\n<!-- demo-table -->\n| method | MAP@R |"
    )
    assert (
        "| gsp | 55.00 | - | - | - | - | 0.81 | 250 | 20 |" in text
        and "GSP − GAP: +48.00 MAP@R" in text
    )
    assert (
        "| Collage, frozen | GSP > GAP | +17 | GSP 60.00 ± 1.00 | reproduced | `python experiments/collage/run.py` |"
        in text
    )
    assert (
        "| metrix_mixup | see its README | - | no published results.json: not re-run for this table"
        in text
    )
    assert "<!-- /reproductions-table -->\n<!-- reproduce-tables -->\n" in text
    assert text.endswith("<!-- /reproduce-tables -->\nend\n") and "old list" not in text
    # the tables of `gspdml reproduce --list`, one line each
    for key, table in TABLES.items():
        assert f"| {key} | {table.citation} | {table.protocol} | {len(table.rows)} |" in text
    assert "machine: 0 min in total (collage 0 min);" in text  # 12.3 s
    experiment = (root / "experiments" / "collage" / "README.md").read_text()
    assert (
        "**frozen** — seeds 0, 1, 2; training time 12 s" in experiment
        and "| gsp | 60.00 ± 1.00 |" in experiment
    )
    assert "- Collage, frozen: **reproduced**" in experiment and "old" not in experiment
    assert readme_tables.main([*args, "--check"]) == 0


def test_the_time_line_sums_every_run_of_every_published_experiment(tmp_path):
    for name, seconds in (("a", [600.0]), ("b", [300.0, 600.0])):
        (tmp_path / name).mkdir()
        runs = {f"key{k}": {"seconds": value} for k, value in enumerate(seconds)}
        (tmp_path / name / "results.json").write_text(json.dumps({"runs": runs}))
    (tmp_path / "c").mkdir()  # not re-run: no results.json, not counted
    line = readme_tables.time_line(tmp_path)
    assert "machine: 25 min in total (a 10, b 15 min)" in line


def test_a_readme_without_the_markers_is_refused(tree):
    root, args = tree
    (root / "README.md").write_text("no markers\n")
    with pytest.raises(SystemExit, match="needs exactly one <!-- demo-table -->"):
        readme_tables.main(args)


def test_the_zsr_study_tables_of_paper_vs_code_are_generated(tree):
    """The blocks of docs/paper-vs-code.md get the stored ZSR study rows as mean ± sample std per
    variant (x100, in the order run); a block whose file is missing is left alone."""
    root, args = tree
    docs = root / "docs"
    docs.mkdir()
    rows = [
        {"variant": v, "seed": s, "steps": 300, "test_map_at_r": m, "test_precision_at_1": 0.9}
        for s, m in enumerate((0.70, 0.74))
        for v in ("b first", "a second")
    ]
    (docs / "zsr_defaults.json").write_text(json.dumps(rows))
    page = docs / "paper-vs-code.md"
    page.write_text(
        "x\n<!-- zsr-defaults -->\nold\n<!-- /zsr-defaults -->\n"
        "<!-- zsr-init-76 -->\nkept\n<!-- /zsr-init-76 -->\n"
    )
    assert readme_tables.main(args) == 0
    text = page.read_text()
    assert "| b first | 72.00 ± 2.83 | 90.00 ± 0.00 |\n| a second | 72.00 ± 2.83 |" in text
    assert "2 seeds, 300 steps" in text and "old" not in text and "\nkept\n" in text
    assert readme_tables.main([*args, "--check"]) == 0
