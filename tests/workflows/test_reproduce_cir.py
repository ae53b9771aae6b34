"""``gspdml reproduce`` of the composed-image-retrieval tables (Psomas thesis Tables 4.1-4.5,
5.2, 5.3; Tables 4.6-4.7 in test_reproduce_cir_generic.py) end to end through the CLI, on tiny trees in the layout of the authors' releases
(the FreeDom ``data/`` folder, a PatternNet tree with PatternCom annotations) with the tiny
offline CLIP-style model.

Cross-checks: every number of the written tables equals the ``gspdml cir`` command's own output
on the same data (Table 4.2 against ``--source real``, a protocol built independently of the
shared Table 4.1 evaluation), PatternCom rows equal a naive re-computation (scores, stable
ranking, non-interpolated AP, mean over attributes written out here), and a second call
evaluates nothing.
"""

import json

import numpy as np
import pytest
from PIL import Image

from gspdml.cir.features import encode_image_files, encode_texts
from gspdml.cir.patterncom import read_patterncom
from gspdml.cli import main
from gspdml.workflows.reproduce import get_table
from tests.helpers.cir_tiny_clip import build
from tests.helpers.freedom_release import LAYOUTS, write_release_tree

MODEL = "python:tests.helpers.cir_tiny_clip:build"
WORDS = ["cat", "dog", "tiger", "wolf", "fish", "car", "tree", "house", "boat", "bridge"]
#: the PatternNet tree: class folder -> images; annotations: attribute -> (file, value) lines
PATTERNNET = {"airplane": 4, "tennis_court": 3, "bridge": 2, "overpass": 2, "forest": 3}
ANNOTATIONS = {
    "color": [("airplane", 0, "white"), ("airplane", 1, "white"), ("airplane", 2, "purple")]
    + [("tennis_court", 0, "blue"), ("tennis_court", 1, "red"), ("tennis_court", 2, "red")],
    "shape": [("airplane", 3, "delta"), ("airplane", 0, "swept")]
    + [("forest", 0, "round"), ("forest", 1, "square"), ("forest", 2, "square")],
}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def data(tmp_path, monkeypatch):
    """The release's data/ folder: the four FreeDom benchmarks (each database holds FreeDom's
    k = 20 proxy images: 4 LTLL images per location and era), the Open Images class-name
    vocabulary, and PatternNet/ with its PatternCom annotation CSVs."""
    labels, classes, _, queries = LAYOUTS["ltll"]
    monkeypatch.setitem(LAYOUTS, "ltll", (labels, classes, 4, queries))
    root = tmp_path / "data"
    for name in ("imagenet_r", "minidn", "nico", "ltll"):
        write_release_tree(root, name)
    rows = "".join(f"/m/{i:03d},{word}\n" for i, word in enumerate(WORDS))
    (root / "open_image_v7_class_names.csv").write_text("LabelName,DisplayName\n" + rows)
    rng = np.random.default_rng(7)
    for folder, count in PATTERNNET.items():
        (root / "PatternNet" / "images" / folder).mkdir(parents=True)
        for i in range(count):
            pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(
                root / "PatternNet" / "images" / folder / f"{folder}{i}.jpg"
            )
    (root / "PatternNet" / "PatternCom").mkdir()
    for attribute, lines in ANNOTATIONS.items():
        body = "".join(f"{c}{i}.jpg,{attribute},{v}\n" for c, i, v in lines)
        (root / "PatternNet" / "PatternCom" / f"{attribute}.csv").write_text(
            "filename,attribute,value\n" + body
        )
    return root


def reproduce(table, data, out, *extra):
    argv = ["reproduce", table, "--data-root", str(data), "--output-dir", str(out)]
    assert main([*argv, f"model={MODEL}", *extra]) == 0
    return json.loads((out / "tables" / f"{table}.json").read_text())


def cir(capsys, command, data, benchmark, method, *extra):
    """The metrics of ``gspdml cir COMMAND`` on the same data, printed as JSON."""
    capsys.readouterr()
    argv = ["cir", command, "--images", str(data), "--method", method, "--model", MODEL]
    if command == "freedom":
        argv += [
            "--dataset",
            benchmark,
            "--vocabulary",
            str(data / "open_image_v7_class_names.csv"),
        ]
    else:
        argv += ["--images", str(data / "PatternNet"), "--patterncom"]
    assert main([*argv, "--no-cache", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["metrics"]


def ours(payload, key):
    (row,) = [r for r in payload["rows"] if r["key"] == key]
    return {title: cell["ours"] for title, cell in row["cells"].items()}


FREEDOM_METHODS = {"Text": "text", "Image": "image", "TextxImage": "product"}
FREEDOM_METHODS.update({"Text+Image": "sum", "WeiCom": "weicom", "FreeDom": "freedom"})
BENCHMARKS = {"imagenet-r": "imagenet_r", "minidomainnet": "minidn", "nico++": "nico"}
BENCHMARKS["ltll"] = "ltll"


def test_table_4_1_equals_the_cir_command_and_a_second_call_evaluates_nothing(
    data, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "out"
    payload = reproduce("freedom-table4.1", data, out)
    table = get_table("freedom-table4.1")
    columns = {c.title: c for c in table.columns}
    checked = 0
    for row in table.rows:
        entry = next(r for r in payload["rows"] if r["key"] == row.key)
        if row.cir is None:
            assert entry["status"] == row.status and all(
                cell["ours"] is None for cell in entry["cells"].values()
            )
            continue
        assert entry["status"] == "evaluated" and entry["cir"] == row.cir.describe(MODEL)
        metrics = cir(capsys, "freedom", data, BENCHMARKS[row.dataset], FREEDOM_METHODS[row.label])
        for title, value in ours(payload, row.key).items():
            group = columns[title].group
            if group == "all":
                assert value == pytest.approx(metrics["map"], abs=1e-9)
            elif group.removeprefix("from ") in metrics["sources"]:
                want = metrics["sources"][group.removeprefix("from ")]["map"]
                assert value == pytest.approx(want, abs=1e-9), (row.key, title)
            else:  # a column of another benchmark
                assert value is None
            cell = entry["cells"][title]
            if cell["paper"] is not None and value is not None:
                assert cell["diff"] == pytest.approx(value - cell["paper"])
        checked += 1
    assert checked == 24
    text = (out / "tables" / "freedom-table4.1.md").read_text()
    avg = ours(payload, "imagenet-r/FreeDom")["AVG"]
    assert (
        "| FreeDom | imagenet-r | 35.93 | " in text
        and f"| 29.87 | {avg:.2f} | {avg - 29.87:+.2f} |" in text
    )
    assert f"| evaluated (freedom L+a, {MODEL}) |" in text
    stored = sorted((out / "cir").rglob("*.json"))
    assert len(stored) == 24 and {p.parent.name for p in stored} == set(BENCHMARKS.values())
    assert json.loads(stored[0].read_text())["settings"]["model"] == MODEL

    # a second call reuses every stored result: nothing is evaluated
    def refuse(*args, **kwargs):
        raise AssertionError("a stored evaluation was recomputed")

    monkeypatch.setattr("gspdml.cir.evaluation.evaluate_cir", refuse)
    modified = [p.stat().st_mtime_ns for p in stored]
    again = reproduce("freedom-table4.1", data, out)
    assert again["rows"] == payload["rows"]
    assert [p.stat().st_mtime_ns for p in stored] == modified
    # Table 4.2's rows are Table 4.1's ImageNet-R evaluations: written without evaluating
    recalls = reproduce("freedom-table4.2", data, out)
    assert len(sorted((out / "cir").rglob("*.json"))) == 24
    assert sum(r["status"] == "evaluated" for r in recalls["rows"]) == 5
    capsys.readouterr()
    assert main(["reproduce", "freedom-table4.2", "--data-root", str(data), "--dry-run",
                 "--output-dir", str(out), f"model={MODEL}"]) == 0  # fmt: skip
    listing = capsys.readouterr().out
    assert "5 evaluations, 5 stored." in listing
    assert "| imagenet-r/KEDs | missing: a competitor" in listing


def test_table_4_2_equals_the_cir_command_for_the_photo_source(data, tmp_path, capsys):
    """R@10 and R@50 of the real -> target groups and their mean, against ``gspdml cir freedom
    --source real`` (which builds the PHOTO-source protocol only)."""
    payload = reproduce("freedom-table4.2", data, tmp_path / "out")
    table = get_table("freedom-table4.2")
    for row in table.runnable:
        metrics = cir(
            capsys, "freedom", data, "imagenet_r", FREEDOM_METHODS[row.label], "--source", "real"
        )
        assert set(metrics["groups"]) == {
            f"real->{t}" for t in ("cartoon", "origami", "sculpture", "toy")
        }
        got = ours(payload, row.key)
        for column in table.columns:
            group = metrics if column.group == "from real" else metrics["groups"][column.group]
            assert got[column.title] == pytest.approx(group[column.metric], abs=1e-9)


def test_table_4_5_visual_memories_equal_the_cir_command(data, tmp_path, capsys):
    """No memory (variant L), an external memory (a .npy of image embeddings), the union with
    the database and the database: the command's mAP (on MiniDomainNet, whose queries are not in
    the database, and LTLL, whose are), the mean over the four benchmarks the Avg."""
    memory = tmp_path / "laion.npy"
    np.save(memory, np.random.default_rng(3).normal(size=(24, 16)).astype(np.float32))
    payload = reproduce("freedom-table4.5", data, tmp_path / "out", f"memory={memory}")
    options = {
        "all/NoMemory": ["--variant", "L"],
        "all/LAION40M": ["--memory", str(memory)],
        "all/Database+LAION40M": ["--memory", str(memory), "--memory-union"],
        "all/Database": [],
    }
    titles = {"ImageNet-R": "imagenet_r", "MiniDn": "minidn", "NICO++": "nico", "LTLL": "ltll"}
    seen = set()
    for key, extra in options.items():
        got = ours(payload, key)
        for title in ("MiniDn", "LTLL"):
            metrics = cir(capsys, "freedom", data, titles[title], "freedom", *extra)
            assert got[title] == pytest.approx(metrics["map"], abs=1e-9), (key, title)
        assert got["Avg"] == pytest.approx(np.mean([got[t] for t in titles]), abs=1e-9)
        seen.add(tuple(got[t] for t in titles))
    assert len(seen) > 1  # the memories change the numbers
    # without the external memory the LAION rows cannot run: an error that names the fix
    capsys.readouterr()
    argv = [
        "reproduce",
        "freedom-table4.5",
        "--data-root",
        str(data),
        "--output-dir",
        str(tmp_path),
    ]
    assert main(argv) == 2
    assert "give memory=PATH" in capsys.readouterr().err
    assert main([*argv, "--dry-run"]) == 0  # which lists what it needs
    listing = capsys.readouterr().out
    assert listing.count("| external: needs memory=PATH |") == 4
    assert listing.count("| union: needs memory=PATH |") == 4
    assert main([*argv, f"model={MODEL}", "--rows", "all/NoMemory", "all/Database"]) == 0


@pytest.mark.parametrize(
    ("table", "row", "options"),
    [
        ("freedom-table4.3", "all/k=10,n=7", ["--k", "10", "--n", "7"]),
        ("freedom-table4.4", "all/E+/m=3", ["--variant", "E+", "--m", "3"]),
    ],
)
def test_tables_4_3_and_4_4_settings_equal_the_cir_command(
    data, tmp_path, capsys, table, row, options
):
    """A row of the k x n grid and of the m x components grid: FreeDom with that setting, the
    command's mAP on each benchmark (LTLL, whose queries are in the database, and MiniDomainNet,
    whose are not) and their mean the Avg; the rows not selected are listed, not evaluated."""
    payload = reproduce(table, data, tmp_path / "out", "--rows", row)
    got = ours(payload, row)
    titles = {"ImageNet-R": "imagenet_r", "MiniDn": "minidn", "NICO++": "nico", "LTLL": "ltll"}
    for title in ("MiniDn", "LTLL"):
        metrics = cir(capsys, "freedom", data, titles[title], "freedom", *options)
        assert got[title] == pytest.approx(metrics["map"], abs=1e-9), title
    assert got["Avg"] == pytest.approx(np.mean([got[t] for t in titles]), abs=1e-9)
    statuses = {entry["key"]: entry["status"] for entry in payload["rows"]}
    assert statuses.pop(row) == "evaluated"
    assert set(statuses.values()) <= {"not selected"} | {
        r.status for r in get_table(table).rows if r.missing
    }
    stored = sorted((tmp_path / "out" / "cir").rglob("*.json"))
    assert len(stored) == 4  # one evaluation per benchmark, of the selected row only


# ------------------------------------------------------------------------- PatternCom (WeiCom)
def naive_patterncom(data, method, lam=None):
    """mAP (%) of a method on PatternCom written out: raw cosine scores, CDF normalisation
    Φ((s − mean)/std) per query with the unbiased std, a stable descending sort, the
    non-interpolated AP (mean precision at each positive), averaged per attribute, then over
    the attributes."""
    from math import erf, sqrt

    model = build()
    patterncom = read_patterncom(data / "PatternNet")
    protocol = patterncom.protocol
    database = encode_image_files(model, protocol.database).double()
    per_attribute = {}
    for query in protocol.queries:
        s_image = (database @ database[query.image]).tolist()
        text = encode_texts(model, [query.text])[0].double()
        s_text = (database @ text).tolist()

        def cdf(values):
            mean = sum(values) / len(values)
            std = sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            return [0.5 * (1 + erf((v - mean) / std / sqrt(2))) for v in values]

        if method == "text":
            scores = s_text
        elif method == "image":
            scores = s_image
        elif method == "average":
            scores = [(a + b) / 2 for a, b in zip(s_image, s_text)]
        else:
            scores = [lam * t + (1 - lam) * i for i, t in zip(cdf(s_image), cdf(s_text))]
        order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
        positives = set(query.positives.tolist())
        hits, precisions = 0, []
        for rank, j in enumerate(order, 1):
            if j in positives:
                hits += 1
                precisions.append(hits / rank)
        per_attribute.setdefault(query.group, []).append(sum(precisions) / len(positives))
    return {a: 100 * float(np.mean(v)) for a, v in per_attribute.items()}


def test_table_5_2_equals_a_naive_recomputation_and_the_cir_command(data, tmp_path, capsys):
    payload = reproduce("weicom-table5.2", data, tmp_path / "out")
    methods = {"Text": ("text", None), "Image": ("image", None), "Text&Image": ("average", None)}
    methods.update({"WeiCom(lambda=0.5)": ("weicom", 0.5), "WeiCom(lambda=0.3)": ("weicom", 0.3)})
    methods["WeiCom(lambda=0.6)"] = ("weicom", 0.6)
    for row in get_table("weicom-table5.2").rows:
        method, lam = methods[row.label.split("/")[1]]
        want = naive_patterncom(data, method, lam)
        got = ours(payload, row.key)
        assert set(want) == {"color", "shape"}
        assert got["Color"] == pytest.approx(want["color"], abs=1e-6)
        assert got["Shape"] == pytest.approx(want["shape"], abs=1e-6)
        assert got["Avg"] == pytest.approx(np.mean(list(want.values())), abs=1e-6)
        assert got["Context"] is None  # no context.csv in this tree
        extra = ["--lambda", str(lam)] if lam is not None else []
        metrics = cir(capsys, "weicom", data, "patterncom", method, *extra)
        assert got["Avg"] == pytest.approx(metrics["map"], abs=1e-9)


def test_table_5_3_lambda_sweep_ends_at_the_unimodal_baselines(data, tmp_path, capsys):
    """λ = 0 ranks as the image baseline and λ = 1 as the text baseline (a CDF is monotone per
    query), and every λ equals the naive WeiCom; a model override reaches every row."""
    payload = reproduce("weicom-table5.3", data, tmp_path / "out")
    # this tree is not the PatternCom of Table 5.1: said once per evaluation
    assert capsys.readouterr().err.count("the annotations differ from Table 5.1") == 11
    assert {r["cir"] for r in payload["rows"]} >= {f"weicom λ=0.6, {MODEL}"}
    settings = [
        json.loads(p.read_text())["settings"] for p in (tmp_path / "out" / "cir").rglob("*.json")
    ]
    assert len(settings) == 11 and {s["model"] for s in settings} == {MODEL}
    image, text = naive_patterncom(data, "image"), naive_patterncom(data, "text")
    assert ours(payload, "patterncom/WeiCom(lambda=0.0)")["Color"] == pytest.approx(image["color"])
    assert ours(payload, "patterncom/WeiCom(lambda=1.0)")["Shape"] == pytest.approx(text["shape"])
    for lam in (0.2, 0.7):
        want = naive_patterncom(data, "weicom", lam)
        got = ours(payload, f"patterncom/WeiCom(lambda={lam})")
        assert got["Avg"] == pytest.approx(np.mean(list(want.values())), abs=1e-6)


def test_bad_settings_are_named(data, tmp_path, capsys):
    argv = ["reproduce", "weicom-table5.3", "--data-root", str(data), "--output-dir", str(tmp_path)]
    assert main([*argv, "modle=clip"]) == 2
    err = capsys.readouterr().err
    assert "'modle=clip'" in err and "model, weights, device, batch_size" in err
    assert main([*argv, "batch_size=0"]) == 2
    assert "batch_size" in capsys.readouterr().err
    assert main([*argv, f"model={MODEL}", "--seeds", "0"]) == 2
    assert "trains nothing" in capsys.readouterr().err
    assert main(["reproduce", "weicom-table5.3", "--data-root", str(tmp_path / "nowhere"),
                 "--output-dir", str(tmp_path), f"model={MODEL}"]) == 2  # fmt: skip
    assert "PatternNet" in capsys.readouterr().err
