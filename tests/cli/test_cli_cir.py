"""``gspdml cir freedom|weicom`` end to end on a tiny image folder with the tiny CLIP-style model."""

import json

import numpy as np
from PIL import Image

from gspdml.cir.composition_protocol import domain_conversion_protocol, evaluate_protocol
from gspdml.cir.features import encode_image_files, encode_texts
from gspdml.cir.freedom import FreeDom, TextMemory
from gspdml.cli import build_parser, main
from tests.helpers.cir_tiny_clip import build

MODEL = "python:tests.helpers.cir_tiny_clip:build"


def make_folder(root):
    rng = np.random.default_rng(0)
    rows = ["path,class,domain"]
    for domain in ("photo", "sketch"):
        for cls in ("cat", "dog"):
            (root / "images" / domain / cls).mkdir(parents=True)
            for i in range(3):
                relative = f"{domain}/{cls}/{i}.png"
                Image.fromarray(rng.integers(0, 256, (18, 18, 3), dtype=np.uint8)).save(
                    root / "images" / relative
                )
                rows.append(f"{relative},{cls},{domain}")
    (root / "labels.csv").write_text("\n".join(rows) + "\n")
    (root / "words.txt").write_text(
        "\n".join(["cat", "dog", "tiger", "wolf", "fish", "car", "tree", "house"]) + "\n"
    )
    return root


def run(argv, capsys):
    code = main(["cir", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_parser_wiring():
    args = build_parser().parse_args(["cir", "weicom", "--images", "x", "--patterncom"])
    assert (
        args.cir_method == "weicom"
        and args.patterncom == ""
        and args.ap == "standard"
        and args.lam is None
    )
    args = build_parser().parse_args(["cir", "freedom", "--images", "x", "--labels", "l.csv"])
    assert (args.k, args.n, args.m, args.variant, args.ap) == (20, 7, None, "L+a", "trapezoid")


def test_freedom_domain_conversion_matches_the_library(tmp_path, capsys):
    root = make_folder(tmp_path)
    argv = [
        "freedom",
        "--images",
        str(root / "images"),
        "--labels",
        str(root / "labels.csv"),
        "--vocabulary",
        str(root / "words.txt"),
        "--model",
        MODEL,
        "--k",
        "4",
        "--n",
        "3",
        "--m",
        "2",
        "--recall-at",
        "2",
        "--top",
        "3",
        "--cache",
        str(tmp_path / "cache"),
        "--json",
    ]
    code, out, _ = run(argv, capsys)
    assert code == 0
    report = json.loads(out)
    assert report["settings"]["database"] == 12 and report["settings"]["queries"] == 12
    assert report["settings"]["m"] == 2 and report["metrics"]["ap"] == "trapezoid"
    assert set(report["metrics"]["groups"]) == {"photo->sketch", "sketch->photo"}
    # the same numbers through the library
    model = build()
    paths = [
        str(root / "images" / d / c / f"{i}.png")
        for d in ("photo", "sketch")
        for c in ("cat", "dog")
        for i in range(3)
    ]
    classes = [c for d in ("photo", "sketch") for c in ("cat", "dog") for i in range(3)]
    domains = [d for d in ("photo", "sketch") for c in ("cat", "dog") for i in range(3)]
    feats = encode_image_files(model, paths)
    words = ["cat", "dog", "tiger", "wolf", "fish", "car", "tree", "house"]
    freedom = FreeDom(
        model.encode_text, TextMemory(words, encode_texts(model, words)), feats, k=4, n=3, m=2
    )
    protocol = domain_conversion_protocol(paths, classes, domains)
    want = evaluate_protocol(
        protocol, lambda idx, t: freedom.scores(feats[idx], t, feats), ap="trapezoid", recall_at=[2]
    )
    assert abs(report["metrics"]["map"] - want["map"]) < 1e-6
    assert abs(report["metrics"]["recall@2"] - want["recall@2"]) < 1e-6
    first = report["queries"][0]
    assert (
        first["image"] == "photo/cat/0.png" and first["text"] == "sketch" and len(first["top"]) == 3
    )
    # a second run is served from the feature cache and prints a text table
    code, out, _ = run(argv + ["--domain-text", "photo=real photo"], capsys)
    assert {q["text"] for q in json.loads(out)["queries"]} == {"sketch", "real photo"}
    code, out, _ = run(argv[:-1] + ["--method", "image"], capsys)
    assert code == 0 and "AVG (mean over groups)" in out and "[1] photo/cat/0.png + 'sketch'" in out
    assert "  1.   1.0000  photo/cat/0.png" in out  # image-only ranks the query itself first


def test_weicom_with_explicit_queries(tmp_path, capsys):
    root = make_folder(tmp_path)
    (root / "queries.csv").write_text(
        "image,text,positives\nphoto/cat/0.png,sketch,sketch/cat/0.png;sketch/cat/1.png;sketch/cat/2.png\n"
        "sketch/dog/1.png,photo,photo/dog/2.png\n"
    )
    code, out, _ = run(
        [
            "weicom",
            "--images",
            str(root / "images"),
            "--queries",
            str(root / "queries.csv"),
            "--model",
            MODEL,
            "--lambda",
            "0.4",
            "--no-cache",
            "--json",
            "--top",
            "12",
        ],
        capsys,
    )
    assert code == 0
    report = json.loads(out)
    assert report["settings"]["lambda"] == 0.4 and report["metrics"]["ap"] == "standard"
    second = report["queries"][1]
    assert [hit["positive"] for hit in second["top"]].count(True) == 1
    rank = [hit["path"] for hit in second["top"]].index("photo/dog/2.png")
    assert abs(second["ap"] - 100.0 / (rank + 1)) < 1e-9  # one positive: AP = 1 / rank
    scores = [hit["score"] for hit in second["top"]]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)


def test_errors_are_one_line_and_name_the_fix(tmp_path, capsys, monkeypatch):
    root = make_folder(tmp_path)
    code, _, err = run(
        [
            "freedom",
            "--images",
            str(root / "images"),
            "--labels",
            str(root / "labels.csv"),
            "--model",
            MODEL,
        ],
        capsys,
    )
    assert code == 2 and "--vocabulary FILE" in err
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    code, _, err = run(
        [
            "weicom",
            "--images",
            str(root / "images"),
            "--labels",
            str(root / "labels.csv"),
            "--no-cache",
        ],
        capsys,
    )
    assert code == 2 and "not available offline" in err and "--weights PATH" in err
    code, _, err = run(
        [
            "weicom",
            "--images",
            str(root / "images"),
            "--labels",
            str(root / "labels.csv"),
            "--model",
            MODEL,
            "--domain-text",
            "photo",
        ],
        capsys,
    )
    assert code == 2 and "domain-text: expected LABEL=TEXT" in err
    code, _, err = run(
        ["weicom", "--images", str(root / "images"), "--no-cache", "--model", MODEL], capsys
    )
    assert code == 2 and "exactly one of --labels, --queries, --patterncom" in err
    (root / "bad.csv").write_text("image,words\nphoto/cat/0.png,sketch\n")
    code, _, err = run(
        [
            "weicom",
            "--images",
            str(root / "images"),
            "--queries",
            str(root / "bad.csv"),
            "--model",
            MODEL,
        ],
        capsys,
    )
    assert code == 2 and "bad.csv: needs a header with columns image, text" in err


def test_weicom_patterncom_protocol(tmp_path, capsys):
    rng = np.random.default_rng(1)
    for folder, count in {"bridge": 2, "overpass": 2, "forest": 2}.items():
        (tmp_path / "PatternNet" / "images" / folder).mkdir(parents=True)
        for i in range(count):
            Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(
                tmp_path / "PatternNet" / "images" / folder / f"{folder}{i}.jpg"
            )
    (tmp_path / "PatternNet" / "PatternCom").mkdir()
    (tmp_path / "PatternNet" / "PatternCom" / "context.csv").write_text(
        "filename,attribute,value\nbridge0.jpg,context,water\nbridge1.jpg,context,water\n"
        "overpass0.jpg,context,concrete\noverpass1.jpg,context,concrete\n"
    )
    code, out, err = run(
        [
            "weicom",
            "--images",
            str(tmp_path / "PatternNet"),
            "--patterncom",
            "--model",
            MODEL,
            "--no-cache",
            "--json",
            "--top",
            "6",
        ],
        capsys,
    )
    assert code == 0 and "differ from Table 5.1" in err
    report = json.loads(out)
    assert report["settings"]["database"] == 6 and report["settings"]["queries"] == 4
    assert list(report["metrics"]["groups"]) == ["context"]
    first = report["queries"][0]
    assert first["image"] == "images/bridge/bridge0.jpg" and first["text"] == "concrete"
    assert sorted(h["path"] for h in first["top"] if h["positive"]) == [
        "images/overpass/overpass0.jpg",
        "images/overpass/overpass1.jpg",
    ]


def test_queries_whose_positives_are_all_empty_are_an_error_not_a_zero_map(tmp_path, capsys):
    """A positives column empty for every query scored mAP 0.0 with exit 0: nothing was
    scorable (issue 39, sibling of #8)."""
    root = make_folder(tmp_path)
    (root / "empty.csv").write_text("image,text,positives\nphoto/cat/0.png,sketch,\n")
    argv = ["weicom", "--images", str(root / "images"), "--queries", str(root / "empty.csv")]
    code, out, err = run([*argv, "--model", MODEL, "--no-cache", "--json"], capsys)
    assert code == 2 and out == ""
    assert "empty.csv: the positives column is empty for every query" in err
    assert "drop the column to print rankings only" in err
