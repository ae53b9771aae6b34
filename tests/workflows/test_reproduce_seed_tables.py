"""Every result table of the five papers has a key of `gspdml reproduce`, the README's count of
them is the generated output of ``--list``, and the tables that print one run twice agree."""

import json
from pathlib import Path

import pytest

from gspdml.cli import main
from gspdml.workflows.reproduce import TABLES, list_markdown
from gspdml.workflows.reproduce.seed_tables import RESULT_TABLES, coverage_markdown

README = Path(__file__).resolve().parents[2] / "README.md"
EVERY = [key for keys in RESULT_TABLES.values() for key in keys]


def test_the_registry_is_exactly_the_papers_result_tables():
    assert len(EVERY) == len(set(EVERY)) == 54
    assert sorted(TABLES) == sorted(EVERY)
    # --list shows them in the papers' order within each paper's module
    listed = [line.split(" | ")[0].strip("| ") for line in list_markdown().splitlines()]
    assert [key for key in listed if key in TABLES] == list(TABLES)


def test_the_count_says_what_is_missing_and_the_readme_shows_the_generated_count():
    runnable = {key: len(table.runnable) for key, table in TABLES.items()}
    text = coverage_markdown(TABLES, runnable)
    placeholders = sorted(key for key, count in runnable.items() if not count)
    assert text.startswith(
        f"The five papers print 54 result tables; `gspdml reproduce` knows 54 of them: "
        f"{54 - len(placeholders)} with rows that run here, {len(placeholders)} whose every row"
    )
    assert "Not yet registered" not in text
    assert "Not yet registered: gsp-table5." in coverage_markdown(
        {k: v for k, v in TABLES.items() if k != "gsp-table5"}, runnable
    )
    assert text.strip() in README.read_text()  # scripts/readme_tables.py writes --list there


def test_a_preset_printed_in_several_proxynca_tables_has_one_number():
    """ProxyNCA++ paper Tables 3, 7, 8, 9, 10, 12 print the same CUB runs more than once (e.g.
    +scale +norm +prob +cbs: 69.1 in Tables 8, 9 and 10): one preset, one printed R@1."""
    printed: dict[str, set] = {}
    for number in (3, 7, 8, 9, 10, 12):
        for row in TABLES[f"proxynca-table{number}"].runnable:
            if row.dataset == "cub":
                printed.setdefault(row.preset, set()).add(row.paper["R@1"])
    assert len(printed) >= 38 and all(len(numbers) == 1 for numbers in printed.values())
    assert printed["proxynca-cub"] == {TABLES["proxynca-table7"].rows[0].paper["R@1"]}


@pytest.mark.parametrize("key", [key for key in EVERY if not TABLES[key].runnable])
def test_a_table_without_runnable_rows_is_written_with_every_reason(key, tmp_path):
    argv = ["reproduce", key, "--data-root", str(tmp_path), "--output-dir", str(tmp_path)]
    assert main(argv) == 0
    payload = json.loads((tmp_path / "tables" / f"{key}.json").read_text())
    assert [(e["key"], e["status"]) for e in payload["rows"]] == [
        (row.key, f"missing: {row.missing}") for row in TABLES[key].rows
    ]
    assert not (tmp_path / "frozen").exists()


def test_table_3_10_counts_the_resnet18_classifiers(tmp_path, capsys):
    """Psomas thesis Table 3.10 through the CLI: the ResNet-18 Baseline and SimPool rows are
    counted (ours equals gspdml.models.resources' count of the same model), the paper's numbers
    beside them (transcribed a second time), the other methods listed with their reason."""
    from gspdml.models.resources import count_resources, imagenet_classifier

    argv = ["reproduce", "simpool-table3.10", "--rows", "resnet18/*", "--output-dir", str(tmp_path)]
    assert main([*argv, "--dry-run"]) == 0
    assert "| resnet18/SimPool | resnet18 + simpool + Linear(1000), 224 x 224 |" in (
        capsys.readouterr().out
    )
    assert main(argv) == 0
    payload = json.loads((tmp_path / "tables" / "simpool-table3.10.json").read_text())
    entries = {entry["key"]: entry for entry in payload["rows"]}
    printed = {"Baseline": (11.7, 1.82), "SimPool": (12.2, 1.84)}
    for method, pooling in (("Baseline", "gap"), ("SimPool", "simpool")):
        counted = count_resources(imagenet_classifier("resnet18", pooling))
        cells = entries[f"resnet18/{method}"]["cells"]
        assert entries[f"resnet18/{method}"]["status"] == "evaluated"
        assert cells["#params (M)"]["ours"] == pytest.approx(counted.params / 1e6)
        assert cells["GFLOPs"]["ours"] == pytest.approx(counted.macs / 1e9)
        assert (cells["#params (M)"]["paper"], cells["GFLOPs"]["paper"]) == printed[method]
    assert entries["resnet18/CaiT"]["status"].startswith("missing: the count builds")
    assert entries["resnet50/Baseline"]["status"] == "not selected"
    assert main([*argv[:2], "--output-dir", str(tmp_path), "batch_size=2"]) == 2
