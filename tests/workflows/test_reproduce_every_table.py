"""Every table of `gspdml reproduce` end to end: one row of each, on tiny generated trees of the
four benchmarks in their official layouts, through the real CLI.

One ``--data-root`` holds CUB-200-2011 (``images.txt`` & co.), Cars196 (``cars_annos.mat`` +
``car_ims/``), Stanford Online Products (``Ebay_train.txt`` / ``Ebay_test.txt``) and In-Shop
(``Eval/list_eval_partition.txt``), written once for the module (tests/helpers/datasets.py). Each
table runs one row with the tiny CNN for 8 steps of 16 images and one seed; the rows are chosen so that every
protocol meets every dataset it runs on (fair, conventional and two-stage on all four, tuning on
CUB) and so that every model family runs (GSP, ZSR, XML, CCP, XBM, NetVLAD, LIBC, Metrix and its
competitors, ProxyNCA++). The spec tables (``SPEC_PROTOCOLS``; ``cir``: composed image
retrieval, ``frozen``: released pre-trained models, ``probe``: their ImageNet classification,
``classify``: one classifier per row) are run by their own runners and tested with their own commands (tests/workflows/test_reproduce_cir.py,
tests/workflows/test_reproduce_simpool.py, tests/workflows/test_reproduce_probe.py).

Cross-checks: "ours" in the written table is recomputed here from the models' own files, read
independently of the protocol code: a conventional or two-stage row from the run's
``results.json``, a tuning row from the validation round the run recorded at the step of its
weights (``metrics.jsonl``), a fair row's 128D number as the mean of the four fold models'
``results.json`` and its 512D number by a slow loop over the rankings of the concatenated test
embeddings (tests/helpers/knn_reference.py); the paper's number is the one printed in the
paper, transcribed here a second time.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from gspdml.cli import main
from gspdml.workflows.reproduce import TABLES
from gspdml.workflows.reproduce.registry import SPEC_PROTOCOLS, Row, Table
from tests.helpers.datasets import make_cars, make_cub, make_inshop, make_sop, write_image
from tests.helpers.knn_reference import slow_query_scores
from tests.workflows.test_reproduce import SMOKE

#: the smoke regime in 8 steps of 16 images (4 classes x 4): 128 samples, enough for the 128
#: prototypes of the SOP and In-Shop GSP presets to initialise before the one evaluation; 4
#: classes per batch is what the two-stage protocol's first stage has (half of 8 training classes)
REGIME = [*SMOKE, "data.samples_per_class=4"]

#: table -> (the row run here, a column, the paper's number in it); the comment: where it is printed
ROWS = {
    "gsp-table1": ("sop/C2+ZSP+GSP", "512D MAP@R", 46.81),  # GSP paper, Table 1
    "gsp-table2": ("inshop/PAnchor+GSP", "512D MAP@R", 58.44),  # GSP paper, supplement Table 2
    "gsp-table3a": ("sop/C1+XBM+GSP", "R@1", 79.59),  # GSP paper, Table 3a
    "gsp-table3b": ("sop/LIBC+GSP^512", "R@1", 81.65),  # GSP paper, Table 3b
    "gsp-table4": ("cub/C2+VLAD-8x16", "128D MAP@R", 15.19),  # GSP paper, supplement Table 4
    "gsp-table5": ("cub/C2+GAP", "val MAP@R", 39.77),  # GSP paper, supplement Table 5
    "xml-table1": ("cars/PA+XML", "512D MAP@R", 27.56),  # XML paper, Table 1
    "xml-table1-conventional": ("inshop/LIBC+XML", "R@1", 93.04),  # XML paper, Table 1
    "ccp-table3.1": ("inshop/C2+CCP-L", "128D MAP@R", 57.24),  # Gürbüz thesis, Table 3.1
    "ccp-table3.2a": ("cars/MS+CCP-L", "R@1", 86.01),  # Gürbüz thesis, Table 3.2a
    "ccp-table3.2b": ("cars/LIBC^512", "R@1", 88.1),  # Gürbüz thesis, Table 3.2b
    "thesis-table5.1": ("cars/C1+XBM+GSP", "512D P@1", 83.31),  # Gürbüz thesis, Table 5.1
    "thesis-table5.2a": ("inshop/C1+XBM+GSP", "R@1", 90.92),  # Gürbüz thesis, Table 5.2a
    "thesis-table5.2b": ("cub/C1+XBM+GSP^128", "MAP@R", 24.04),  # Gürbüz thesis, Table 5.2b
    # Gürbüz thesis, Table 5.4: m 16, mu 0.3, eps 20, lambda 0.5
    "thesis-table5.3": ("cars/C2+GSP", "128D MAP@R", 17.88),  # Gürbüz thesis, Table 5.3
    "thesis-table5.4": ("cub/PNCA+GSP(m16,mu.3,eps20,lam.5)", "val MAP@R", 40.51),
    "proxynca-table3": ("cub/ProxyNCA++^1024", "NMI", 74.2),  # ProxyNCA++ paper, Table 3
    "proxynca-table4": ("cars/ProxyNCA++(-max,-fast)", "R@1", 87.9),  # ProxyNCA++, Table 4
    "proxynca-table5": ("sop/ProxyNCA++^512", "R@1", 80.7),  # ProxyNCA++ paper, Table 5
    "proxynca-table6": ("inshop/ProxyNCA++", "R@1", 90.9),  # ProxyNCA++ paper, Table 6
    "proxynca-table7": ("cub/-cbs", "R@1", 69.6),  # ProxyNCA++ paper, Table 7
    "proxynca-table8": ("cub/+scale+norm/with-prob", "R@1", 65.7),  # ProxyNCA++ paper, Table 8
    "proxynca-table9": ("cub/+fast/without-scale", "R@1", 56.3),  # ProxyNCA++ paper, Table 9
    "proxynca-table10": ("cub/+norm/GAP", "R@1", 60.2),  # ProxyNCA++ paper, Table 10
    "proxynca-table12": ("cub/NormSoftMax(+max,+fast)", "NMI", 69.6),  # ProxyNCA++, Table 12
    "proxynca-table13": ("cars/NormSoftMax", "R@1", 85.0),  # ProxyNCA++ paper, Table 13
    "proxynca-table14": ("sop/ProxyNCA++", "R@1", 80.7),  # ProxyNCA++ paper, Table 14
    "proxynca-table15": ("inshop/ProxyNCA++", "R@1", 87.6),  # ProxyNCA++ paper, Table 15
    "metrix-table2.3": ("inshop/ProxyNCA+++Metrix", "R@1", 91.9),  # Psomas thesis, Table 2.3
    "metrix-table2.4": ("sop/ProxyAnchor+PS", "R@100", 96.4),  # Psomas thesis, Table 2.4
    "metrix-table2.5": ("cars/{input,feature,embed}", "R@1", 85.3),  # Psomas thesis, Table 2.5
    "metrix-table2.6": ("cub/pos-pos,input", "R@8", 87.1),  # Psomas thesis, Table 2.6
}

#: the tables with no runnable row, and why none can run: they are written with every row's
#: missing reason and no model (a preset added to one of them fails the coverage test below,
#: so that a row of it joins ROWS)
NOT_RUNNABLE = {
    # training steps per method on SOP and In-Shop; the thesis text lost the rows' method labels
    "ccp-table3.3": (
        "the thesis' text lost the method labels of Table 3.3, and no pairing of these rows with "
        "the base losses and their CCP versions gives the 10-35 % more steps its text states, so "
        "no row can name a preset"
    ),
    # the ProxyNCA++ authors' re-runs of Margin, semi-hard triplets, MS and HORDE with average
    # vs max pooling; the untrained backbone's rows are each run's step-0 baseline in results.json
    "proxynca-table11": (
        "HORDE (Jacob et al., ICCV 2019: contrastive losses on cascaded high-order moments of the "
        "local features) is not implemented, and Table 11 states neither its orders and "
        "projections nor its Inception-v3 recipe"
    ),
}

#: the folder of each dataset under --data-root (the presets' data.dataset.root, one per
#: dataset: tests/presets/test_preset_recipes.py pins it)
FOLDERS = {"cub": "CUB_200_2011", "cars": "cars196", "sop": "Stanford_Online_Products"}
FOLDERS["inshop"] = "InShop"


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, Path]:
    """(data root, output dir): the four benchmarks' tiny trees, shared by every table."""
    base = tmp_path_factory.mktemp("every-table")
    data = base / "data"
    # 10 training classes: the tuning protocol's 5 folds validate on 2 classes each; 4 images
    # a class at least: a batch of REGIME holds 4 of each of its classes
    make_cub(data, write_image, classes=20, per_class=4)
    make_cars(data / FOLDERS["cars"], write_image, classes=16, per_class=4)
    make_sop(data, write_image, train_classes=8, test_classes=8, per_class=4)
    make_inshop(data / FOLDERS["inshop"], write_image, train_items=8, test_items=8, per_item=4)
    assert sorted(p.name for p in data.iterdir()) == sorted(FOLDERS.values())
    return data, base / "runs"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _row(table: Table, key: str) -> Row:
    return next(row for row in table.rows if row.key == key)


# ------------------------------------------------------------------------------- coverage
def test_every_table_has_a_row_here_or_says_why_none_runs():
    trained = {key for key, table in TABLES.items() if table.protocol not in SPEC_PROTOCOLS}
    assert set(ROWS) | set(NOT_RUNNABLE) == trained and not set(ROWS) & set(NOT_RUNNABLE)
    for key, reason in NOT_RUNNABLE.items():
        table = TABLES[key]
        assert not table.runnable, f"{key} has runnable rows now: run one of them in ROWS"
        assert reason in {row.missing for row in table.rows}
    covered = set()
    for key, (label, column, _) in ROWS.items():
        table = TABLES[key]
        row = _row(table, label)
        assert row.preset is not None and column in row.paper
        covered.add((table.protocol, row.dataset))
    datasets = set(FOLDERS)
    expected = {(p, d) for p in ("fair", "conventional", "two_stage") for d in datasets}
    assert covered == expected | {("tuning", "cub")}


# ---------------------------------------------------------------------------- end to end
def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())["test"]


def _weights_round(run_dir: Path) -> dict:
    """The validation round the run recorded at the step of the weights it kept."""
    step = json.loads((run_dir / "results.json").read_text())["weights_step"]
    rounds = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    (found,) = [r for r in rounds if r["split"] == "val" and r["step"] == step]
    return found


def _normalised(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _slow_scores(arrays: list[dict], metrics) -> dict:
    """The metrics of the fold models' concatenated test embeddings (each part L2-normalised,
    the concatenation re-normalised: the fair protocol's 512D ensemble, Gürbüz thesis §5.3.4.1),
    by the slow loop: leave-one-out, or query -> gallery where the split has one (In-Shop)."""

    def concatenate(name):  # a list: the slow loop reads it element by element
        return _normalised(np.concatenate([_normalised(a[name]) for a in arrays], axis=1)).tolist()

    query, labels = concatenate("query"), arrays[0]["query_labels"].tolist()
    gallery = concatenate("gallery") if "gallery" in arrays[0] else None
    gallery_labels = arrays[0]["gallery_labels"].tolist() if gallery is not None else None
    scores = [
        slow_query_scores(query, labels, i, gallery=gallery, gallery_labels=gallery_labels)
        for i in range(len(labels))
    ]
    scores = [s for s in scores if s is not None]
    return {m: float(np.mean([s[m] for s in scores])) for m in metrics}


def _own_numbers(table: Table, root: Path) -> dict:
    """{column group: {metric: value}} of the row's models, read from their own files."""
    if table.protocol == "fair":
        folds = [root / f"fold{f}-seed0" for f in range(4)]
        metrics = {column.metric for column in table.columns}
        models = [_results(run) for run in folds]
        stored = []
        for run in folds:
            with np.load(run / "test_embeddings.npz") as npz:
                stored.append({name: npz[name] for name in npz.files})
        return {
            "128D": {m: float(np.mean([model[m] for model in models])) for m in metrics},
            "512D": _slow_scores(stored, metrics),
        }
    if table.protocol == "tuning":
        return {"val": _weights_round(root / "fold0-seed0")}
    run = root / ("trainval-seed0" if table.protocol == "two_stage" else "seed0")
    return {"best": _results(run), "repeats": _results(run)}  # one seed: the best is the mean


@pytest.mark.parametrize("key", sorted(ROWS))
def test_a_row_of_every_table_end_to_end(key, tree, capsys):
    data, out = tree
    table = TABLES[key]
    label, column, paper = ROWS[key]
    row = _row(table, label)
    argv = ["reproduce", key, "--rows", label, "--seeds", "0", "--data-root", str(data)]
    assert main([*argv, "--output-dir", str(out), *REGIME]) == 0
    printed = capsys.readouterr().out
    assert (out / "tables" / f"{key}.md").read_text() == printed
    payload = json.loads((out / "tables" / f"{key}.json").read_text())
    assert [entry["key"] for entry in payload["rows"]] == [r.key for r in table.rows]
    for written, other in zip(payload["rows"], table.rows):
        if other.key != label:
            assert written["status"] in ("not selected", other.status) and not written["runs"]
    (entry,) = [e for e in payload["rows"] if e["key"] == label]
    assert entry["status"] == "trained" and entry["num_realisations"] == 1
    assert entry["cells"][column]["paper"] == paper

    root = out / table.protocol / str(row.preset)
    own = _own_numbers(table, root)
    for col in table.columns:
        cell = entry["cells"][col.title]
        reported = row.paper.get(col.title)
        assert cell["paper"] == (None if reported is None else reported.value)
        mine = own[col.group].get(col.metric)
        if mine is None:  # a column of another dataset (R@2 of CUB on In-Shop): not recorded
            assert reported is None and cell["ours"] is None, col
            continue
        assert cell["ours"] == pytest.approx(100 * mine, abs=1e-9), col
        assert cell["ours_std"] is None  # one realisation has no spread
        if reported is not None:
            assert cell["diff"] == pytest.approx(cell["ours"] - reported.value)
    cells = entry["cells"][table.columns[0].title]
    assert cells["ours"] is not None
    ours = f"{cells['ours']:.2f}"
    assert any(
        line.startswith(f"| {row.label} | {row.dataset} |") and f" | {ours} | " in line
        for line in printed.splitlines()
    )


@pytest.mark.parametrize("key", sorted(NOT_RUNNABLE))
def test_a_table_without_runnable_rows_lists_every_row_with_its_reason(key, tree):
    data, out = tree
    assert main(["reproduce", key, "--data-root", str(data), "--output-dir", str(out)]) == 0
    payload = json.loads((out / "tables" / f"{key}.json").read_text())
    rows = TABLES[key].rows
    assert [(e["key"], e["status"], e["runs"]) for e in payload["rows"]] == [
        (row.key, f"missing: {row.missing}", {}) for row in rows
    ]
    assert all(cell["ours"] is None for e in payload["rows"] for cell in e["cells"].values())
