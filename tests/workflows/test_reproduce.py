"""`gspdml reproduce`: the tables' wiring, the papers' numbers, --list / --dry-run through the real
CLI, and a table end to end on a tiny CUB-200-2011 tree in its official layout.

Cross-checks: the numbers of rows that several of the papers' tables print (GSP Table 1, Table 2,
Table 4, XML Table 1) agree across the independent transcriptions; every runnable row names a
preset pinned by the recipe test whose dataset is the row's; the GPU-hour estimate is recomputed
from its stated formula; our numbers in the written table equal the trained models' own
results.json, and a second call reuses every model.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.workflows.reproduce import TABLES, Table, get_table, plan_table, reproduce
from gspdml.workflows.reproduce.cir_tables import OTHERS
from gspdml.workflows.reproduce.registry import (
    SECONDS_PER_IMAGE,
    SPEC_PROTOCOLS,
    Reported,
    Row,
    select_rows,
)
from gspdml.workflows.reproduce.run import _ours
from tests.helpers.datasets import make_cub, write_image
from tests.presets.loaded import preset
from tests.presets.test_preset_recipes import PRESETS

#: dataset names of a row -> the reader names its preset may use
READERS = {"cub": {"cub", "cub200"}, "cars": {"cars", "cars196"}, "sop": {"sop"}}
READERS["inshop"] = {"inshop", "in_shop"}

#: a smoke regime for every row: the tiny CNN, 10 px crops, 8 steps of 4 x 2 (64 samples, enough
#: for GSP's 64 prototypes to initialise), one evaluation at the end; usable from the command line
SMOKE = [
    "model.backbone={name: small_cnn, widths: [4, 8], pool_after: [0]}",
    "data.dataset.resize=12",
    "data.dataset.crop=10",
    "data.classes_per_batch=4",
    "data.samples_per_class=2",
    "data.num_workers=0",
    "data.eval_batch_size=64",
    "schedule.max_steps=8",
    "schedule.warmup_steps=0",
    "evaluation.every=8",
    "evaluation.patience=null",
    "trainer.progress=false",
    "trainer.tensorboard=false",
]


def cell(table_key, key, column):
    row = next(r for r in TABLES[table_key].rows if r.key == key)
    return row.paper[column].value


# ------------------------------------------------------------------------------ the registry
@pytest.mark.parametrize("key", [k for k, t in TABLES.items() if t.protocol not in SPEC_PROTOCOLS])
def test_every_runnable_row_is_a_pinned_preset_of_its_dataset(key):
    """Each runnable row names a pinned preset that reads the row's dataset, and a recall column
    the paper prints for the row is one of the preset's ``evaluation.recall_at``, so that the
    written table has our number beside it (ProxyNCA++ Table 6 prints R@40 on In-Shop)."""
    table = TABLES[key]
    depths = {
        column.title: int(column.metric.removeprefix("recall_at_"))
        for column in table.columns
        if column.metric.startswith("recall_at_")
    }
    for row in table.runnable:
        assert row.preset in PRESETS, f"{key} {row.key}: {row.preset} is not a pinned preset"
        config = preset(row.preset)
        if row.dataset in READERS:
            name = config.data.dataset["name"]
            assert name in READERS[row.dataset], f"{key} {row.key}: {row.preset} reads {name}"
        recorded = set(config.evaluation["recall_at"]) if depths else set()
        unrecorded = [t for t, k in depths.items() if t in row.paper and k not in recorded]
        assert not unrecorded, f"{key} {row.key}: {row.preset} records no {unrecorded}"


def test_rows_the_papers_print_twice_agree():
    """Independent transcriptions of the same runs: GSP Table 1 and XML Table 1 repeat rows of
    GSP Table 2; GSP Table 4's CUB column repeats Table 2's CUB 128D MAP@R."""
    for ds in ("sop", "inshop", "cub", "cars"):
        for dim in ("512D", "128D"):
            col = f"{dim} MAP@R"

            def t2(label, ds=ds, col=col):
                return cell("gsp-table2", f"{ds}/{label}", col)

            assert cell("gsp-table1", f"{ds}/C2", col) == t2("C2+GAP")
            assert cell("xml-table1", f"{ds}/Contrastive", col) == t2("C2+GAP")
            for xml, gsp in (
                ("Triplet", "Triplet+GAP"),
                ("MS", "MS+GAP"),
                ("PAnchor", "PAnchor+GAP"),
            ):
                assert cell("xml-table1", f"{ds}/{xml}", col) == t2(gsp)
            # the ZSP+GSP row of Table 1 is C2+GSP of Table 2 (both print 21.52 on CUB 128D)
            assert cell("gsp-table1", f"{ds}/C2+ZSP+GSP", col) == t2("C2+GSP")
    for loss in ("C2", "PNCA"):
        for pooling in ("GAP", "GSP", "DeLF", "GeMean", "GMP", "GMP+GAP"):
            assert cell("gsp-table4", f"cub/{loss}+{pooling}", "128D MAP@R") == cell(
                "gsp-table2", f"cub/{loss}+{pooling}", "128D MAP@R"
            )


#: the cells where the thesis' Table 5.1 and the GSP paper's Table 2 print different means
THESIS_VS_PAPER = {
    ("cub/C2+GSP", "128D MAP@R"): (21.53, 21.52),
    ("inshop/PNCA", "512D P@1"): (87.38, 87.26),
    ("inshop/PNCA", "512D MAP@R"): (57.58, 57.43),
    ("inshop/PNCA", "128D P@1"): (85.04, 84.86),
    ("inshop/PNCA", "128D MAP@R"): (54.72, 54.41),
    ("sop/PAnchor+GSP", "128D MAP@R"): (45.07, 45.97),
}


def test_thesis_table_5_1_repeats_gsp_table_2_but_for_six_printed_cells():
    same = {"C1": "C1+GAP", "C1+XBM": "C1+XBM+GAP", "C2": "C2+GAP", "MS": "MS+GAP"}
    same.update({"Triplet": "Triplet+GAP", "PNCA": "PNCA+GAP", "PAnchor": "PAnchor+GAP"})
    found, compared = {}, 0
    for row in TABLES["thesis-table5.1"].rows:
        if "CCP" in row.label:
            continue
        twin = f"{row.dataset}/{same.get(row.label, row.label)}"
        for column, reported in row.paper.items():
            other = cell("gsp-table2", twin, column)
            compared += 1
            if reported.value != other:
                found[(row.key, column)] = (reported.value, other)
    assert compared == 13 * 4 * 4 and found == THESIS_VS_PAPER


def test_grid_cells_and_missing_rows():
    table = get_table("gsp-table2")
    assert len(table.rows) == 25 * 4 and len(table.runnable) == 100
    assert cell("gsp-table2", "cub/C2+GSP", "128D MAP@R") == 21.52
    row = next(r for r in table.rows if r.key == "cars/PAnchor+GSP")
    assert row.paper["512D P@1"] == Reported(86.46, 0.39) and row.preset == "cars-fair-pa-gsp"
    libc = [r for r in get_table("gsp-table3b").rows if r.label.startswith("LIBC")]
    assert sorted(r.preset for r in libc) == sorted(
        f"libc-{d}{s}" for d in ("cub", "cars", "sop", "inshop") for s in ("", "-gsp")
    )
    # a competitor that does not report In-shop is still listed there, with no number
    (diva,) = [r for r in get_table("gsp-table3a").rows if r.key == "inshop/DiVA"]
    assert diva.missing and not diva.paper
    collage = [r for r in get_table("gsp-table4").rows if r.dataset == "collage" and r.preset]
    assert len(collage) == 30 and {r.protocol for r in collage} == {"split"}
    assert {load_config(r.preset).data.dataset["name"] for r in collage} == {"collage_cifar"}
    assert {r.protocol for r in get_table("gsp-table4").rows if r.dataset == "cub"} == {None}
    with pytest.raises(ValueError, match="exactly one"):
        Row("x", "cub", {}, "cub-fair-c2-gap", "also missing")
    row = Row("x", "cub", {}, "cub-fair-c2-gap")
    with pytest.raises(ValueError, match="unknown protocol 'fiar'"):
        Table("t", "title", "citation", "fiar", (), (row,))
    with pytest.raises(ValueError, match="a cir row needs a cir"):
        Table("t", "title", "citation", "cir", (), (row,))
    with pytest.raises(ValueError, match="repeated rows"):
        Table("t", "title", "citation", "fair", (), (row, row))
    with pytest.raises(ValueError, match="unknown protocol 'spilt'"):
        Table("t", "title", "citation", "fair", (), (Row("x", "cub", {}, "p", protocol="spilt"),))
    fine_tune = Row("y", "cub", {}, "cub-fair-c2-gsp", init_from="cub-fair-c2-gap")
    with pytest.raises(ValueError, match="init_from 'cub-fair-c2-gap' must be the preset"):
        Table("t", "title", "citation", "conventional", (), (fine_tune,))  # no such row
    with pytest.raises(ValueError, match="init_from 'cub-fair-c2-gap' must be the preset"):
        Table("t", "title", "citation", "fair", (), (row, fine_tune))  # fold models, not seeds
    Table("t", "title", "citation", "conventional", (), (row, fine_tune))


def test_cir_rows_are_the_methods_of_a_command_the_cir_cli_accepts():
    """Every CIR row the library evaluates pins the method that ``gspdml cir`` builds from the
    command line of the thesis' setting (chapter 4: ``cir freedom`` with its trapezoid AP, WeiCom
    at the CLI's chapter-4 λ; chapter 5: ``cir weicom`` with the standard AP), parsed by the
    real parser; the rows of competitors stay missing."""
    from gspdml.cli import build_parser
    from gspdml.cli.cir import _method

    benchmarks = {"imagenet-r": ("imagenet_r",), "minidomainnet": ("minidn",)}
    benchmarks.update({"nico++": ("nico",), "ltll": ("ltll",), "patterncom": ("patterncom",)})
    benchmarks["all"] = ("imagenet_r", "minidn", "nico", "ltll")
    benchmarks.update({name: (name,) for name in ("fashioniq", "cirr", "circo")})
    evaluated = {}
    for key, table in TABLES.items():
        if table.protocol != "cir":
            continue
        for row in table.rows:
            if row.cir is None:
                continue
            spec = row.cir
            assert spec.benchmarks == benchmarks[row.dataset]
            command = "weicom" if spec.benchmarks == ("patterncom",) else "freedom"
            argv = ["cir", command, "--images", "data", "--method", spec.method.name]
            argv += ["--model", spec.model]
            if command == "freedom":
                argv += ["--dataset", spec.benchmarks[0], "--vocabulary", "words.csv"]
                argv += ["--variant", spec.method.variant]
                argv += ["--k", str(spec.method.k), "--n", str(spec.method.n)]
                argv += [] if spec.method.m is None else ["--m", str(spec.method.m)]
                argv += ["--oracle", spec.method.oracle]
            elif "lambda=" in row.label:
                argv += ["--patterncom", "--lambda", row.label.split("lambda=")[1].rstrip(")")]
            else:
                argv += ["--patterncom"]
            args = build_parser().parse_args(argv)
            assert _method(args) == spec.method, row.key
            assert spec.ap == args.ap == ("trapezoid" if command == "freedom" else "standard")
            evaluated[key] = evaluated.get(key, 0) + 1
    # Table 4.1: Text, Image, TextxImage, Text+Image, WeiCom, FreeDom per dataset; 4.2: 5;
    # 4.3: 6 k x 5 n; 4.4: 5 components x 5 m (SEARLE's 5 rows are not implemented here)
    assert evaluated == {
        "freedom-table4.1": 6 * 4,
        "freedom-table4.2": 5,
        "freedom-table4.3": 30,
        "freedom-table4.4": 25,
        "freedom-table4.5": 4,
        "freedom-table4.6": 4,  # 2 oracles x 2 variants
        "freedom-table4.7": 5 * 3,  # 5 methods (not Pic2Word, SEARLE) x 3 benchmarks
        "weicom-table5.2": 10,
        "weicom-table5.3": 11,
    }
    assert {r.cir.model for r in TABLES["weicom-table5.3"].rows} == {"remoteclip"}
    rows = {row.label: row for row in get_table("freedom-table4.5").rows}
    assert rows["Database"].paper["ImageNet-R"].value == 29.87  # = Table 4.1's FreeDom AVG
    assert rows["Database+LAION40M"].cir.memory == "union"
    assert rows["LAION40M"].cir.memory == "external"
    assert rows["NoMemory"].cir.method.variant == "L"
    assert get_table("freedom-table4.1").rows[4].missing == OTHERS  # InstructPix2Pix


def test_a_table_of_missing_rows_only_is_written_without_evaluating(tmp_path):
    payload = reproduce(
        get_table("freedom-table4.2"), rows=["*/KEDs", "*/CIReVL"], output_dir=str(tmp_path)
    )
    assert len(payload["rows"]) == 17 and not list(tmp_path.glob("cir/*"))
    statuses = {row["label"]: row["status"] for row in payload["rows"]}
    assert statuses["KEDs"] == statuses["CIReVL"] == f"missing: {OTHERS}"
    assert statuses["FreeDom"] == "not selected"
    text = (tmp_path / "tables" / "freedom-table4.2.md").read_text()
    assert "| KEDs | imagenet-r | 14.80 | – | – | 34.20 |" in text


def test_row_selection_and_unknown_names():
    table = get_table("gsp-table1")
    assert [r.key for r in select_rows(table, ["cub/*"])] == [
        "cub/C2",
        "cub/C2+GSP",
        "cub/C2+ZSP(mu=1)",
        "cub/C2+ZSP+GSP",
    ]
    assert [r.key for r in select_rows(table, ["sop-fair-c2-gsp"])] == ["sop/C2+ZSP+GSP"]
    with pytest.raises(ConfigError, match="names no row of gsp-table1"):
        select_rows(table, ["cub/C3"])
    with pytest.raises(ConfigError, match="did you mean 'gsp-table1'"):
        get_table("gsp-tabel1")


# ------------------------------------------------------------------------ --list, --dry-run
def test_list_through_the_cli(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for key, table in TABLES.items():
        line = next(line for line in out.splitlines() if line.startswith(f"| {key} |"))
        assert line.endswith(
            f"| {len(table.rows)} | {len(table.runnable)} | {len(table.rows) - len(table.runnable)} |"
        )
    # GSP Table 4: 17 poolings x 2 losses x (Cifar Collage, CUB); the two 64x128 ensembles print
    # no Cifar Collage number, and their 4 Cifar Collage rows are listed as missing
    assert "| gsp-table4 | GSP paper, Table 4 (supplement §1.4) | fair | 68 | 64 | 4 |" in out


def test_dry_run_through_the_cli(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["reproduce", "gsp-table2", "--rows", "sop/PAnchor*", "--dry-run"]
    assert main([*args, "--data-root", str(tmp_path)]) == 0
    out, _, printed = capsys.readouterr().out.partition("The paper's numbers")
    lines = [line for line in out.splitlines() if line.startswith("| sop/")]
    assert [line.split(" | ")[1] for line in lines] == ["`sop-fair-pa-gap`", "`sop-fair-pa-gsp`"]
    # the paper's number of every selected row and column, before anything runs (GSP paper
    # supplement Table 2, SOP block, transcribed here a second time)
    assert printed.splitlines()[2:6] == [
        "| Row | 512D P@1 | 512D MAP@R | 128D P@1 | 128D MAP@R |",
        "|---|---|---|---|---|",
        "| sop/PAnchor+GAP | 76.48 ± 0.19 | 48.08 ± 0.26 | 73.50 ± 0.14 | 44.33 ± 0.20 |",
        "| sop/PAnchor+GSP | 77.13 ± 0.16 | 49.05 ± 0.22 | 74.07 ± 0.13 | 45.97 ± 0.17 |",
    ]
    # models x steps x batch x seconds per image: 4 folds x 3 seeds, SOP's typical 78K steps,
    # 32 x 1 proxy batches, BN-Inception
    hours = 12 * 78000 * 32 * SECONDS_PER_IMAGE["bn_inception"] / 3600
    for line in lines:
        cells = line.strip("| ").split(" | ")
        assert cells[2] == f"runs/fair/{cells[1].strip('`')}"
        assert cells[3] == str(tmp_path / "Stanford_Online_Products")
        assert cells[4:] == [
            "12",
            cells[5],
            cells[6],
            "bn_inception",
            "32",
            "78000",
            f"{hours:.2f}",
        ]
    assert f"Estimated GPU-hours: {2 * hours:.1f}" in out
    assert not (tmp_path / "runs").exists()  # nothing is trained or written
    assert main(["reproduce", "gsp-table3b", "--rows", "cub/*", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "| cub/DiVA^512 | – | missing: DiVA" in out
    assert "| cub/LIBC+GSP^512 | `libc-cub-gsp` | runs/conventional/libc-cub-gsp |" in out
    assert (
        "`cub/LIBC+GSP^512` starts from the models of `libc-cub` "
        "(runs/conventional/libc-cub/seed{seed}), trained first when missing." in out
    )
    assert "`cub-conventional-r50-512-c1xbm-gsp`" in out
    # a missing row's printed numbers too, and "–" where the paper prints none
    assert "| cub/DiVA^512 | 69.20 | – |" in out.partition("The paper's numbers")[2]


def test_a_preset_run_by_two_protocols_keeps_their_models_apart():
    """cub-fair-c2-gap is a row of the fair GSP Table 2 and of the tuning-protocol Table 5.4:
    the two protocols' fold0-seed0 models differ, so they live in different folders."""
    (fair,) = plan_table(get_table("gsp-table2"), rows=["cub/C2+GAP"])
    (tuning,) = plan_table(get_table("thesis-table5.4"), rows=["cub/C2+GAP"])
    assert fair.row.preset == tuning.row.preset == "cub-fair-c2-gap"
    assert (fair.root, tuning.root) == (
        Path("runs/fair/cub-fair-c2-gap"),
        Path("runs/tuning/cub-fair-c2-gap"),
    )


def test_overrides_reach_every_row_and_the_estimate():
    table = get_table("gsp-table1")
    plans = plan_table(table, rows=["cub/*"], overrides=SMOKE, seeds=[0])
    assert {p.config.model.backbone["name"] for p in plans} == {"small_cnn"}
    # early stopping off: the run's own length counts, 8 steps of 8 images, 4 fold models
    assert all(p.steps == 8 and p.models == 4 and p.batch == 8 for p in plans)


# ----------------------------------------------------------------------- end to end on CUB
def _tiny_cub(root: Path) -> Path:
    make_cub(root, write_image, classes=16, per_class=3)  # 8 training classes: 4 folds of 2
    return root


def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())["test"]


def test_a_table_end_to_end_on_a_tiny_cub_tree(tmp_path, capsys):
    """GSP Table 3a on CUB: its two runnable rows train (conventional protocol, one seed) and
    the written table holds every CUB row with the paper's number, and ours for the runnable
    ones, equal to the models' own results; a second call reuses both models."""
    data, out = _tiny_cub(tmp_path / "data"), tmp_path / "out"
    argv = ["reproduce", "gsp-table3a", "--rows", "cub/*", "--seeds", "0"]
    argv += ["--data-root", str(data), "--output-dir", str(out), *SMOKE]
    assert main(argv) == 0
    captured = capsys.readouterr()
    printed = captured.out
    payload = json.loads((out / "tables" / "gsp-table3a.json").read_text())
    assert (out / "tables" / "gsp-table3a.md").read_text() == printed
    # status and verdict apart: a smoke run on a tree that is not CUB-200-2011 gets no verdict,
    # and the table and the log say that the data is not the benchmark
    header = next(line for line in printed.splitlines() if line.startswith("| Method"))
    assert header.endswith("| Status | Verdict |")
    ran = [row for row in payload["rows"] if row["status"] == "trained"]
    assert len(ran) == 2 and {row["verdict"] for row in ran} == {"smoke, no verdict"}
    assert "schedule.max_steps" in ran[0]["smoke_keys"]
    check = ran[0]["benchmark"]
    assert not check["is_benchmark"] and check["official_images"] == 11788
    assert (
        f"{check['images']:,} images of {check['classes']:,} classes, not CUB-200-2011" in printed
    )
    assert "not the benchmark, no verdict" in captured.err
    assert {row["verdict"] for row in payload["rows"] if row["status"] != "trained"} == {"–"}
    cub = [row for row in payload["rows"] if row["dataset"] == "cub"]
    assert [row["label"] for row in cub] == [
        r.label for r in get_table("gsp-table3a").rows if r.dataset == "cub"
    ]
    for row in cub:
        r1 = row["cells"]["R@1"]
        assert r1["paper"] is not None
        if row["preset"] is None:
            assert row["status"].startswith("missing: ") and r1["ours"] is None
            continue
        assert row["status"] == "trained" and row["runs"] == {"seed0": "trained"}
        own = _results(out / "conventional" / row["preset"] / "seed0")
        assert r1["ours"] == pytest.approx(100 * own["precision_at_1"])
        assert r1["diff"] == pytest.approx(r1["ours"] - r1["paper"])
        assert row["cells"]["MAP@R"]["ours"] == pytest.approx(100 * own["map_at_r"])
        assert f"| {row['label']} | cub | {r1['paper']:.2f} | {r1['ours']:.2f} |" in printed
    others = [row for row in payload["rows"] if row["dataset"] != "cub"]
    assert others and {row["status"] for row in others} == {"not selected"}

    assert main(argv) == 0
    again = json.loads((out / "tables" / "gsp-table3a.json").read_text())
    assert [row["runs"] for row in again["rows"] if row["runs"]] == [{"seed0": "done"}] * 2
    assert [row["cells"] for row in again["rows"]] == [row["cells"] for row in payload["rows"]]


def test_a_fine_tuning_row_runs_its_source_row_first_and_starts_from_its_models(tmp_path):
    """GSP Table 3b's LIBC+GSP row on CUB fine-tunes the LIBC row's models: selecting it alone
    trains the LIBC model of the seed first, and the LIBC+GSP model starts from it (every tensor
    of the same name, compared here with the LIBC run's model as load_run reads it back); a
    second call reuses both."""
    from gspdml.training import build_run, load_run

    data, out = _tiny_cub(tmp_path / "data"), tmp_path / "out"
    argv = ["reproduce", "gsp-table3b", "--rows", "cub/LIBC+GSP^512", "--seeds", "0"]
    argv += ["--data-root", str(data), "--output-dir", str(out), *SMOKE]
    assert main(argv) == 0
    libc, gsp = (out / "conventional" / name / "seed0" for name in ("libc-cub", "libc-cub-gsp"))
    assert (libc / "model.safetensors").is_file()
    payload = json.loads((out / "tables" / "gsp-table3b.json").read_text())
    (row,) = [r for r in payload["rows"] if r["status"] == "trained"]
    assert row["preset"] == "libc-cub-gsp" and row["runs"] == {"seed0": "trained"}
    assert row["cells"]["R@1"]["ours"] == pytest.approx(100 * _results(gsp)["precision_at_1"])

    config, _ = load_run(gsp, device="cpu")
    assert config.model.init_from == str(out / "conventional" / "libc-cub" / "seed{seed}")
    source = load_run(libc, device="cpu")[1].state_dict()
    start = build_run(config).model.state_dict()
    shared = [name for name in start if name in source]
    assert any(n.startswith("backbone.") for n in shared)
    assert any(n.startswith("pooling.") for n in start if n not in source)  # GSP's own tensors
    for name in shared:
        assert torch.equal(start[name], source[name]), name

    assert main(argv) == 0
    again = json.loads((out / "tables" / "gsp-table3b.json").read_text())
    assert [r["runs"] for r in again["rows"] if r["runs"]] == [{"seed0": "done"}]


def test_a_cifar_collage_row_end_to_end_by_its_own_validation_split(tmp_path):
    """GSP Table 4's Cifar Collage C2+VLAD row on generated CIFAR-100 files in the official
    layout: the split protocol trains one model per seed on the collage's own splits, selected on
    its validation classes; ours is the mean and sample std of the models' own test results. The
    backbone's CIFAR-100 pre-training recipe reads --data-root: its weights are those
    `gspdml pretrain RECIPE --data-root DIR` caches."""
    from gspdml.training.pretrain import load_recipe, weights_path
    from tests.helpers.cifar_files import write_cifar100

    data, out = write_cifar100(tmp_path / "data", per_class=3), tmp_path / "out"
    tiny = [o for o in SMOKE if not o.startswith(("data.dataset.", "model.backbone"))]
    recipe = "smoke-small_cnn-cifar100"  # the tiny stand-in of resnet20-cifar100
    tiny += [f"model.backbone={{name: small_cnn, widths: [8, 16], weights: {recipe}}}"]
    tiny += ["data.dataset.images_per_class=4", "data.classes_per_batch=8"]
    argv = ["reproduce", "gsp-table4", "--rows", "collage/C2+VLAD-8x16", "--seeds", "0", "1"]
    assert main([*argv, "--data-root", str(data), "--output-dir", str(out), *tiny]) == 0
    payload = json.loads((out / "tables" / "gsp-table4.json").read_text())
    (row,) = [r for r in payload["rows"] if r["status"] == "trained"]
    assert row["protocol"] == "split" and row["runs"] == {"seed0": "trained", "seed1": "trained"}
    runs = [out / "split" / "cifar-collage-c2-vlad-8x16" / f"seed{s}" for s in (0, 1)]
    values = [100 * _results(run)["map_at_r"] for run in runs]
    cell = row["cells"]["128D MAP@R"]
    assert cell["paper"] == 21.73 and cell["ours"] == pytest.approx(np.mean(values))
    assert cell["ours_std"] == pytest.approx(np.std(values, ddof=1))
    from gspdml.training import load_run

    trained, _ = load_run(runs[1], device="cpu")
    assert trained.evaluation.split == "val" and trained.seed == 1
    assert trained.data.dataset["name"] == "collage_cifar"
    assert trained.data.dataset["root"] == str(data / "cifar-100-python")
    copy = out / "recipes" / f"{recipe}.yaml"
    assert trained.model.backbone["weights"] == str(copy)
    as_pretrain_sets_it = load_recipe(recipe).on_root(str(data))
    assert load_recipe(copy) == as_pretrain_sets_it and weights_path(as_pretrain_sets_it).is_file()
    text = (out / "tables" / "gsp-table4.md").read_text()
    assert "trained (`cifar-collage-c2-vlad-8x16`, protocol split)" in text


def test_a_two_stage_row_reports_every_recall_depth_over_the_repeats(tmp_path):
    """ProxyNCA++ Table 3 on CUB (the code's two stages, two seeds): R@2..R@8, which the protocol
    summary leaves out, are the mean and sample std of the stage-2 models' own results; NMI is
    the mean of sklearn's NMI of a k-means (n_init=1, seed 0) of each stage-2 model's own test
    embeddings."""
    data, out = _tiny_cub(tmp_path / "data"), tmp_path / "out"
    argv = ["reproduce", "proxynca-table3", "--rows", "cub/ProxyNCA++", "--seeds", "0", "1"]
    assert main([*argv, "--data-root", str(data), "--output-dir", str(out), *SMOKE]) == 0
    payload = json.loads((out / "tables" / "proxynca-table3.json").read_text())
    (row,) = [r for r in payload["rows"] if r["status"] == "trained"]
    assert set(row["runs"]) == {"train-seed0", "trainval-seed0", "train-seed1", "trainval-seed1"}
    for k in (1, 2, 4, 8):
        values = [
            _results(out / "two_stage" / "proxynca-cub" / f"trainval-seed{s}")[f"recall_at_{k}"]
            for s in (0, 1)
        ]
        got = row["cells"][f"R@{k}"]
        assert got["ours"] == pytest.approx(100 * np.mean(values))
        assert got["ours_std"] == pytest.approx(100 * np.std(values, ddof=1))
    nmis = [_sklearn_nmi(out / "two_stage" / "proxynca-cub" / f"trainval-seed{s}") for s in (0, 1)]
    assert row["cells"]["NMI"]["ours"] == pytest.approx(100 * np.mean(nmis))
    assert row["cells"]["NMI"]["ours_std"] == pytest.approx(100 * np.std(nmis, ddof=1))
    assert row["cells"]["NMI"]["paper"] == 75.8


def _sklearn_nmi(run_dir: Path) -> float:
    """NMI computed here, independently of the evaluation service: the run's model embeds the
    test split, sklearn's KMeans (one cluster per class, n_init=1, random_state=0) clusters it."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    from gspdml.data import build_data
    from gspdml.models.inference import split_embeddings
    from gspdml.training import load_run

    config, model = load_run(run_dir, device="cpu")
    test = build_data(config.data.dataset, seed=config.seed).test
    embeddings, labels, _, _ = split_embeddings(model, test, batch_size=64, device="cpu")
    embeddings, labels = embeddings.numpy(), labels.numpy()
    clusters = KMeans(n_clusters=len(np.unique(labels)), n_init=1, random_state=0).fit_predict(
        embeddings.astype(np.float32)
    )
    return normalized_mutual_info_score(labels, clusters)


def test_metrix_tables_repeat_each_other_but_for_four_printed_cells():
    """Psomas thesis Table 2.4 repeats rows of Table 2.3, and Table 2.5's baseline and default
    (feature mixup, all pairs) are Table 2.3's Cars196 contrastive rows."""
    pairs = {
        "Contrastive": "Contrastive",
        "+Metrix/input(pos/anc-neg)": "Contrastive+Metrix/input",
        "+Metrix/embed(pos/anc-neg)": "Contrastive+Metrix/embed",
        "ProxyAnchor": "ProxyAnchor",
        "ProxyAnchor+Metrix/embed": "ProxyAnchor+Metrix/embed",
    }
    found = {}
    for row in TABLES["metrix-table2.4"].rows:
        if row.label not in pairs:
            continue
        for column, reported in row.paper.items():
            other = cell("metrix-table2.3", f"{row.dataset}/{pairs[row.label]}", column)
            if reported.value != other:
                found[(row.key, column)] = (reported.value, other)
    assert found == {
        ("inshop/Contrastive", "R@20"): (96.3, 96.2),
        ("cub/ProxyAnchor", "R@1"): (69.7, 69.5),
        ("cub/ProxyAnchor", "R@2"): (80.0, 79.3),
        ("inshop/+Metrix/embed(pos/anc-neg)", "R@20"): (96.9, 96.8),
    }
    for ablation, label in (
        ("cars/baseline", "Contrastive"),
        ("cars/k=all,feature", "Contrastive+Metrix"),
    ):
        for k in (1, 2, 4):
            assert cell("metrix-table2.5", ablation, f"R@{k}") == cell(
                "metrix-table2.3", f"cars/{label}", f"R@{k}"
            )


def test_ccp_rows_end_to_end(tmp_path):
    """CCP Table 3.2a's C1+CCP-L on CUB (conventional protocol: the CCP projections monitor MAP@R
    while the run selects by P@1 on the test split) and thesis Table 5.1's C1+CCP+GSP (fair
    protocol, CCP inside ZSR, 4 fold models): ours equals the models' own test results."""
    data, out = _tiny_cub(tmp_path / "data"), tmp_path / "out"
    common = ["--seeds", "0", "--data-root", str(data), "--output-dir", str(out), *SMOKE]
    for table, row, protocol, runs in (
        ("ccp-table3.2a", "cub/C1+CCP-L", "conventional", ["seed0"]),
        ("thesis-table5.1", "cub/C1+CCP+GSP", "fair", [f"fold{f}-seed0" for f in range(4)]),
    ):
        assert main(["reproduce", table, "--rows", row, *common]) == 0
        payload = json.loads((out / "tables" / f"{table}.json").read_text())
        (entry,) = [r for r in payload["rows"] if r["status"] == "trained"]
        assert entry["key"] == row
        dirs = [out / protocol / entry["preset"] / run for run in runs]
        column = "R@1" if protocol == "conventional" else "128D MAP@R"
        metric = "precision_at_1" if protocol == "conventional" else "map_at_r"
        mean = np.mean([_results(run)[metric] for run in dirs])
        assert entry["cells"][column]["ours"] == pytest.approx(100 * mean)
    summary = json.loads((dirs[0].parent / "protocol.json").read_text())["summary"]
    steps = [json.loads((run / "results.json").read_text())["steps"] for run in dirs]
    assert summary["training"]["steps"] == {"mean": np.mean(steps), "std": np.std(steps, ddof=1)}


def test_a_column_scales_our_number():
    """Percent columns read fractions x100 (sigma too); Table 3.3's steps column reads thousands."""
    fair = {"num_realisations": 81, "summary": {"128D": {"map_at_r": {"mean": 0.2, "std": 0.01}}}}
    column = TABLES["ccp-table3.1"].columns[0]
    assert column.title == "128D MAP@R" and _ours(fair, column, "fair") == pytest.approx(
        (20.0, 1.0)
    )
    steps = {"num_realisations": 1, "summary": {"training": {"steps": {"mean": 62400, "std": 9}}}}
    (column,) = TABLES["ccp-table3.3"].columns
    assert _ours(steps, column, "fair") == (pytest.approx(62.4), None)
    assert cell("ccp-table3.3", "inshop/Row7", "steps (K)") == 115
