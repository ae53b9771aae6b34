"""The one table writer (:mod:`gspdml.workflows.tables`): plain Markdown tables and the
thesis-layout results tables, written as Markdown beside JSON."""

import json

from gspdml.evaluation.statistics import describe_spread, spread
from gspdml.workflows.tables import (
    markdown_table,
    results_table_markdown,
    write_results_table,
    write_table,
)


def test_markdown_table_layout():
    assert markdown_table(["a", "b"], [[1, "x"]]).splitlines() == [
        "| a | b |",
        "|---|---|",
        "| 1 | x |",
    ]
    assert (
        markdown_table(["a", "b", "c"], [], numbers_right=True).splitlines()[1] == "|---|---:|---:|"
    )


def test_write_table_writes_markdown_beside_json(tmp_path):
    md, js = write_table(tmp_path / "t.json", "| a |\n", {"a": 1})
    assert (md.name, js.name) == ("t.md", "t.json")
    assert md.read_text() == "| a |\n" and json.loads(js.read_text()) == {"a": 1}


def test_write_table_keeps_a_dot_in_the_name(tmp_path):
    """Tables named after a paper's table number (ccp-table3.1, thesis-table5.2a) each get their
    own files (the dot was read as a suffix: both wrote ccp-table3.md / thesis-table5.md)."""
    first = write_table(tmp_path / "ccp-table3.1", "1\n", 1)
    second = write_table(tmp_path / "ccp-table3.2a.md", "2\n", 2)
    assert [p.name for p in (*first, *second)] == [
        "ccp-table3.1.md",
        "ccp-table3.1.json",
        "ccp-table3.2a.md",
        "ccp-table3.2a.json",
    ]
    assert first[0].read_text() == "1\n" and second[0].read_text() == "2\n"


def test_results_table_layout(tmp_path):
    summary = {
        space: {
            "precision_at_1": {"mean": 0.5, "std": 0.01},
            "map_at_r": {"mean": 0.25, "std": 0.002},
        }
        for space in ("128D", "512D")
    }
    shared = spread("realisations", 81, 12)
    rows = {
        "C2+GSP": {
            "summary": summary,
            "num_realisations": 81,
            "spread": {"128D": shared, "512D": shared},
        }
    }
    table = results_table_markdown(rows)
    assert table.splitlines()[0] == (
        "| Method | 512D P@1 | 512D MAP@R | 128D P@1 | 128D MAP@R | ± is the |"
    )
    assert table.splitlines()[2] == (
        "| C2+GSP | 50.00 ± 1.00 | 25.00 ± 0.20 | 50.00 ± 1.00 | 25.00 ± 0.20 | sample std over "
        "81 realisations built from 12 models (realisations share models: not independent) |"
    )
    md, js = write_results_table(rows, tmp_path / "table.md")
    assert md.read_text() == table
    assert json.loads(js.read_text())["C2+GSP"]["num_realisations"] == 81
    assert json.loads(js.read_text())["C2+GSP"]["spread"]["512D"] == shared


def test_every_spread_names_its_unit_and_its_independent_models():
    assert (
        describe_spread(spread("seeds", 3, 3)) == "sample std over 3 seeds (3 independent models)"
    )
    assert describe_spread(spread("collections", 3, 12)) == (
        "sample std over 3 disjoint collections (one seed at every fold) of 12 models"
    )
    summary = {"repeats": {"map_at_r": {"mean": 0.2, "std": 0.01}}}
    row = {
        "summary": summary,
        "num_realisations": 3,
        "spread": {"repeats": spread("repeats", 3, 3)},
    }
    table = results_table_markdown({"x": row}, columns=(("repeats", "map_at_r", "MAP@R"),))
    assert table.splitlines()[2].endswith("| sample std over 3 repeats (3 independent models) |")
