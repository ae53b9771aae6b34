"""``gspdml reproduce`` of the Psomas thesis Tables 4.6 (FreeDom's oracle) and 4.7 (Fashion-IQ,
CIRR, CIRCO) end to end through the CLI, on tiny trees in the official release layouts with the
tiny offline CLIP-style model: every number of the written table equals the ``gspdml cir
freedom`` command's own output on the same data; a row whose benchmark folder or model is absent
is listed as missing with that reason; ``--dry-run`` shows the paper's numbers."""

import json
import shutil

import numpy as np
import pytest

from gspdml.cli import main
from gspdml.workflows.reproduce import get_table
from tests.helpers.freedom_release import LAYOUTS, write_release_tree
from tests.helpers.generic_cir_release import WORDS, write_generic_release

MODEL = "python:tests.helpers.cir_tiny_clip:build"
#: a text memory of 20 words: FreeDom's n = m = 15 fit
VOCABULARY = [
    *WORDS,
    "cat",
    "house",
    "boat",
    "bridge",
    "tree",
    "car",
    "wolf",
    "shirt",
    "sock",
    "hat",
]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A data folder with the three generic benchmarks, the four FreeDom benchmarks (LTLL with 4
    images per location and era, so k = 20 proxies fit) and the vocabulary."""
    labels, classes, _, queries = LAYOUTS["ltll"]
    monkeypatch.setitem(LAYOUTS, "ltll", (labels, classes, 4, queries))
    root = tmp_path / "data"
    root.mkdir()
    write_generic_release(root)
    for name in ("imagenet_r", "minidn", "nico", "ltll"):
        write_release_tree(root, name)
    (root / "open_image_v7_class_names.csv").write_text(
        "LabelName,DisplayName\n" + "".join(f"/m/{i},{w}\n" for i, w in enumerate(VOCABULARY))
    )
    return root


def reproduce(table, data, out, *extra):
    argv = ["reproduce", table, "--data-root", str(data), "--output-dir", str(out)]
    assert main([*argv, f"model={MODEL}", *extra]) == 0
    return json.loads((out / "tables" / f"{table}.json").read_text())


def cir_metrics(capsys, data, dataset, method, *options):
    """The metrics of ``gspdml cir freedom --dataset DATASET`` on the same data, as JSON."""
    capsys.readouterr()
    argv = ["cir", "freedom", "--images", str(data), "--dataset", dataset, "--model", MODEL]
    argv += ["--method", method, "--vocabulary", str(data / "open_image_v7_class_names.csv")]
    assert main([*argv, *options, "--no-cache", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["metrics"]


ROWS = {  # row -> the command's options
    "fashioniq/FreeDom(k=1,n=15,m=15)": ("freedom", "--k", "1", "--n", "15", "--m", "15"),
    "cirr/FreeDom(default)": ("freedom",),
    "circo/Text+Image(N)": ("weicom",),  # λ = 0.5 under `cir freedom`
}


def test_table_4_7_rows_equal_the_cir_command(data, tmp_path, capsys):
    payload = reproduce("freedom-table4.7", data, tmp_path / "out", "--rows", *ROWS)
    table = get_table("freedom-table4.7")
    entries = {entry["key"]: entry for entry in payload["rows"]}
    for key, (method, *options) in ROWS.items():
        entry = entries[key]
        assert entry["status"] == "evaluated", entry["status"]
        benchmark = key.split("/")[0]
        metrics = cir_metrics(capsys, data, benchmark, method, *options)
        filled = 0
        for column in table.columns:
            ours = entry["cells"][column.title]["ours"]
            if column.group == benchmark:
                want = metrics[column.metric]
            elif column.group in metrics["groups"] and benchmark == "fashioniq":
                want = metrics["groups"][column.group][column.metric]
            else:  # another benchmark's column
                assert ours is None, (key, column.title)
                continue
            assert ours == pytest.approx(want, abs=1e-9), (key, column.title)
            filled += 1
        assert filled == {"fashioniq": 9, "cirr": 8, "circo": 5}[benchmark]
        paper = entry["cells"][
            table.columns[[c.group for c in table.columns].index(benchmark)].title
        ]
        assert paper["diff"] == pytest.approx(paper["ours"] - paper["paper"])
    # the paper's numbers, transcribed a second time (Psomas thesis Table 4.7)
    assert entries["cirr/FreeDom(default)"]["cells"]["CIRR"]["paper"] == 28.96
    assert entries["fashioniq/FreeDom(k=1,n=15,m=15)"]["cells"]["Fashion-IQ"]["paper"] == 10.30
    assert entries["circo/Text+Image(N)"]["cells"]["CIRCO"]["paper"] == 10.61
    assert entries["cirr/TextxImage"]["status"] == "not selected"


def test_table_4_7_lists_what_is_absent_with_its_reason(data, tmp_path, capsys):
    shutil.rmtree(data / "CIRCO")
    rows = ("cirr/TextxImage", "circo/TextxImage")
    payload = reproduce("freedom-table4.7", data, tmp_path / "out", "--rows", *rows)
    status = {entry["key"]: entry["status"] for entry in payload["rows"]}
    assert status["cirr/TextxImage"] == "evaluated"
    assert status["circo/TextxImage"].startswith(f"missing: dataset not found at {data / 'CIRCO'}")
    # the model's weights are not here: every runnable row is missing, saying so
    argv = ["reproduce", "freedom-table4.7", "--data-root", str(data)]
    argv += ["--output-dir", str(tmp_path / "other"), "--rows", *rows]
    assert main([*argv, "model=clip", f"weights={tmp_path / 'absent.pt'}"]) == 0
    table = json.loads((tmp_path / "other" / "tables" / "freedom-table4.7.json").read_text())
    status = {entry["key"]: entry["status"] for entry in table["rows"]}
    assert status["cirr/TextxImage"].startswith(
        "missing: the vision-language model is not available here: weights for open_clip"
    )
    assert status["circo/TextxImage"].startswith("missing: dataset not found at")
    # the dry run: the evaluations, the absent dataset, and the paper's number of every row
    capsys.readouterr()
    argv = ["reproduce", "freedom-table4.7", "--data-root", str(data), "--dry-run"]
    assert main([*argv, "--output-dir", str(tmp_path / "out"), f"model={MODEL}"]) == 0
    listing = capsys.readouterr().out
    assert "| circo/FreeDom(k=1) | missing: dataset not found at" in listing
    assert "| cirr/FreeDom(k=1,n=15,m=15) | freedom L+a k=1 n=15 m=15 |" in listing
    assert "| fashioniq/SEARLE | missing: a competitor the thesis ran or quoted" in listing
    for number in ("6.77", "24.42", "29.75", "31.50", "28.96", "15.43", "13.41"):
        assert number in listing


def test_table_4_6_oracle_row_equals_the_cir_command(data, tmp_path, capsys):
    """The object oracle on L+: per dataset the command's change in mAP, their mean the Avg."""
    payload = reproduce("freedom-table4.6", data, tmp_path / "out", "--rows", "all/object/L+")
    (entry,) = [e for e in payload["rows"] if e["key"] == "all/object/L+"]
    assert entry["status"] == "evaluated" and entry["cir"] == f"freedom L+ object oracle, {MODEL}"
    titles = {"ImageNet-R": "imagenet_r", "MiniDn": "minidn", "NICO++": "nico", "LTLL": "ltll"}
    got = {title: cell["ours"] for title, cell in entry["cells"].items()}
    for title, dataset in titles.items():
        metrics = cir_metrics(
            capsys, data, dataset, "freedom", "--variant", "L+", "--oracle", "object"
        )
        plain = cir_metrics(capsys, data, dataset, "freedom", "--variant", "L+")
        assert got[title] == pytest.approx(metrics["map_change"], abs=1e-9), title
        assert metrics["map_change"] == pytest.approx(metrics["map"] - plain["map"], abs=1e-9)
    assert got["Avg"] == pytest.approx(np.mean([got[t] for t in titles]), abs=1e-9)
    assert entry["cells"]["LTLL"]["paper"] == 4.00 and entry["cells"]["Avg"]["paper"] == 1.54
    statuses = {e["key"]: e["status"] for e in payload["rows"]}
    assert statuses == {
        "all/object/E+": "not selected",
        "all/object/L+": "evaluated",
        "all/domain/E+": "not selected",
        "all/domain/L+": "not selected",
    }
