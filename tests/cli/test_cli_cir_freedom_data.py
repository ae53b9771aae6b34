"""``gspdml cir freedom`` with an external visual memory (Psomas thesis Table 4.5) and on the
FreeDom benchmarks in the release layout, checked against a naive re-computation."""

import json
import shutil
from collections import Counter

import numpy as np
import torch
from PIL import Image

from gspdml.cir.composition_protocol import (
    domain_conversion_protocol,
    evaluate_protocol,
)
from gspdml.cir.domain_datasets import domain_dataset_protocol
from gspdml.cir.features import encode_image_files
from gspdml.cli import main
from tests.helpers.cir_tiny_clip import build
from tests.helpers.freedom_release import write_release_tree

MODEL = "python:tests.helpers.cir_tiny_clip:build"
WORDS = ["cat", "dog", "tiger", "wolf", "fish", "car", "tree", "house", "boat"]
K, N, M = 3, 2, 2


def make_images(folder, names, seed):
    rng = np.random.default_rng(seed)
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (18, 18, 3), dtype=np.uint8)).save(folder / name)
    return [str((folder / name).resolve()) for name in names]


def naive_scores(query, target, memory, database, model):
    """FreeDom (Eq. 4.17) for one query, step by step from §4.3: k proxies by stable sort of
    the image similarities (the query itself first when it is not in the memory), n words per
    proxy, the m most frequent words (ties: first seen), late fusion weighted by count/max."""
    vocabulary = model.encode_text(WORDS)
    sims = [float(query @ z) for z in memory]
    order = sorted(range(len(memory)), key=lambda j: -sims[j])
    proxies = [memory[j] for j in order[:K]]
    if max(sims) < 0.98:
        proxies = [query] + proxies[: K - 1]
    bag = []
    for proxy in proxies:
        word_sims = [float(proxy @ v) for v in vocabulary]
        bag += sorted(range(len(WORDS)), key=lambda i: -word_sims[i])[:N]
    counts = Counter(bag)
    chosen = sorted(counts, key=lambda w: (-counts[w], bag.index(w)))[:M]
    top = max(counts[w] for w in chosen)
    h = sum(counts[w] / top * model.encode_text([f"{WORDS[w]} {target}"])[0] for w in chosen)
    return h @ database.T


def run(argv, capsys):
    code = main(["cir", "freedom", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_external_visual_memory_matches_a_naive_computation(tmp_path, capsys):
    names = [
        f"{d}/{c}/{i}.png" for d in ("photo", "sketch") for c in ("cat", "dog") for i in (0, 1)
    ]
    paths = make_images(tmp_path / "images", names, 0)
    (tmp_path / "labels.csv").write_text(
        "path,class,domain\n" + "".join(f"{n},{n.split('/')[1]},{n.split('/')[0]}\n" for n in names)
    )
    (tmp_path / "words.txt").write_text("\n".join(WORDS) + "\n")
    memory_paths = make_images(tmp_path / "memory", [f"m{i}.png" for i in range(5)], 1)
    shutil.copy(paths[3], tmp_path / "memory" / "z_copy.png")  # one query is in the memory
    memory_paths.append(str((tmp_path / "memory" / "z_copy.png").resolve()))
    common = ["--images", str(tmp_path / "images"), "--labels", str(tmp_path / "labels.csv")]
    common += ["--vocabulary", str(tmp_path / "words.txt"), "--model", MODEL, "--no-cache"]
    common += ["--k", str(K), "--n", str(N), "--m", str(M), "--top", "8", "--json"]

    model = build()
    database = encode_image_files(model, paths)
    external = encode_image_files(model, memory_paths)
    classes = [n.split("/")[1] for n in names]
    domains = [n.split("/")[0] for n in names]
    protocol = domain_conversion_protocol(paths, classes, domains)

    def check(argv, memory):
        code, out, _ = run(common + argv, capsys)
        assert code == 0
        report = json.loads(out)

        def score(idx, texts):
            rows = [
                naive_scores(database[i], t, memory, database, model) for i, t in zip(idx, texts)
            ]
            return torch.stack(rows)

        want = evaluate_protocol(protocol, score, ap="trapezoid")
        assert abs(report["metrics"]["map"] - want["map"]) < 1e-9
        for query, got in zip(protocol.queries, report["queries"]):
            expected = score([query.image], [query.text])[0]
            top = [names.index(hit["path"]) for hit in got["top"]]
            assert torch.allclose(
                torch.tensor([hit["score"] for hit in got["top"]]), expected[top], atol=2e-6
            )
        return report

    alone = check(["--memory", str(tmp_path / "memory")], external)
    assert alone["settings"]["memory"] == str(tmp_path / "memory")
    union = check(
        ["--memory", str(tmp_path / "memory"), "--memory-union"], torch.cat([database, external])
    )
    default = check([], database)
    assert default["settings"]["memory"] == "database"
    assert len({alone["metrics"]["map"], union["metrics"]["map"], default["metrics"]["map"]}) > 1
    # a .npy of embeddings (any scale: ℓ2-normalised on load) is the same memory as the folder
    np.save(tmp_path / "memory.npy", 3.0 * external.detach().numpy())
    code, out, _ = run(common + ["--memory", str(tmp_path / "memory.npy")], capsys)
    assert code == 0 and abs(json.loads(out)["metrics"]["map"] - alone["metrics"]["map"]) < 1e-6

    np.save(tmp_path / "bad.npy", np.ones((3, 5), dtype=np.float32))
    code, _, err = run(common + ["--memory", str(tmp_path / "bad.npy")], capsys)
    assert code == 2 and "expected image embeddings of shape [M, 16]" in err and "[3, 5]" in err
    code, _, err = run(common + ["--memory-union"], capsys)
    assert code == 2 and "memory-union: needs an external memory: --memory PATH" in err
    code, _, err = run(common + ["--method", "image", "--memory", str(tmp_path / "memory")], capsys)
    assert code == 2 and "--method image has none" in err


def test_freedom_on_a_release_benchmark(tmp_path, capsys):
    write_release_tree(tmp_path / "data", "minidn")
    (tmp_path / "words.txt").write_text("\n".join(WORDS) + "\n")
    argv = ["--images", str(tmp_path / "data"), "--dataset", "minidn", "--model", MODEL]
    argv += ["--vocabulary", str(tmp_path / "words.txt"), "--no-cache", "--json"]
    argv += ["--k", str(K), "--n", str(N), "--m", str(M)]
    code, out, _ = run(argv, capsys)
    assert code == 0
    report = json.loads(out)
    assert report["settings"]["database"] == 4 * 3 * 2 and report["settings"]["queries"] == 12 * 3
    assert {"recall@50", "recall@100"} <= set(report["metrics"])  # the authors' cut-offs
    assert report["metrics"]["groups"]["real->sketch"]["queries"] == 3
    assert {q["text"] for q in report["queries"] if q["group"].endswith("->real")} == {"photo"}
    # the same mAP from the library's reader and the naive FreeDom (queries are outside the database)
    model = build()
    protocol = domain_dataset_protocol("minidn", tmp_path / "data")
    database = encode_image_files(model, protocol.database)
    queries = encode_image_files(model, protocol.query_images)

    def score(idx, texts):
        rows = [naive_scores(queries[i], t, database, database, model) for i, t in zip(idx, texts)]
        return torch.stack(rows)

    want = evaluate_protocol(protocol, score, ap="trapezoid")
    assert abs(report["metrics"]["map"] - want["map"]) < 1e-9
    # Table 4.1's columns: per source domain, the mean over its target domains
    groups, sources = report["metrics"]["groups"], report["metrics"]["sources"]
    assert list(sources) == ["clipart", "painting", "real", "sketch"]
    for source, row in sources.items():
        targets = [g for g in groups if g.startswith(source + "->")]
        assert len(targets) == 3
        assert abs(row["map"] - sum(groups[g]["map"] for g in targets) / 3) < 1e-9
    assert abs(sum(r["map"] for r in sources.values()) / 4 - report["metrics"]["map"]) < 1e-9
    code, out, _ = run(argv + ["--source", "sketch"], capsys)
    assert set(json.loads(out)["metrics"]["groups"]) == {
        "sketch->clipart",
        "sketch->painting",
        "sketch->real",
    }
