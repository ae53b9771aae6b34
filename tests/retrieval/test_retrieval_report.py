import base64
import html.parser
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from gspdml.errors import ConfigError, DataError
from gspdml.models.inference import embed
from gspdml.retrieval.encoder import load_model_and_transform
from gspdml.retrieval.figures import (
    curve_series,
    png_data_uri,
    training_curves_svg,
    upsample_weights,
)
from gspdml.retrieval.report import SCRIPT, choose_queries, read_metrics
from gspdml.retrieval.report_tables import weights_step
from gspdml.retrieval.sources import ImageFiles
from tests.helpers.knn_reference import slow_query_scores
from tests.helpers.retrieval import run_cli, write_image_folder, write_run

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
]


def chromium(page, profile, *args):
    binary = (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )
    if binary is None:
        pytest.fail(
            "headless Chromium not found: install it with `apt-get install -y chromium` (Debian)"
        )
    done = subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
    )
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done, console


class Tiles(html.parser.HTMLParser):
    """Collects the report's figures (class list, caption text) and every tag name."""

    def __init__(self):
        super().__init__()
        self.figures, self.tags, self.images, self._open = [], [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "figure":
            self._open = {"classes": attrs.get("class", "").split(), "text": "", "img": False}
            self.figures.append(self._open)
        if tag == "img" and self._open is not None:
            self._open["img"] = True
            self.images.append(attrs["src"])

    def handle_endtag(self, tag):
        if tag == "figure":
            self._open = None

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data + "\n"


def test_report_in_headless_chromium(tmp_path):
    write_image_folder(tmp_path / "images", classes=("red", "green", "blue", "<b>x&y"), per_class=3)
    write_run(tmp_path / "run", pooling="simpool")  # attention weights [B, 8, 8] -> heatmaps
    page = tmp_path / "report.html"
    assert (
        run_cli(
            "report",
            tmp_path / "run",
            "--images",
            tmp_path / "images",
            "--out",
            page,
            "--queries",
            "6",
            "-k",
            "4",
            "--worst",
            "0",
            "--no-progress",
        )
        == 0
    )

    # one browser run: the DOM after the page's scripts ran, and a screenshot of the page
    shot = tmp_path / "report.png"
    done, console = chromium(
        page, tmp_path / "profile", "--dump-dom", f"--screenshot={shot}", "--window-size=1200,1600"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert console == [], console
    dom = Tiles()
    dom.feed(done.stdout)
    results = [f for f in dom.figures if "result" in f["classes"]]
    queries = [f for f in dom.figures if "query" in f["classes"]]
    heatmaps = [f for f in dom.figures if "heatmap" in f["classes"] and f["img"]]
    assert len(queries) == 6 and len(heatmaps) == 6 and len(results) == 6 * 4
    assert all(src.startswith("data:image/png;base64,") for src in dom.images)
    # correct marks agree with the labels printed in the captions (label = 2nd caption line)
    for row in range(6):
        query_label = queries[row]["text"].split("\n")[1]
        for tile in results[row * 4 : (row + 1) * 4]:
            label = tile["text"].split("\n")[2]
            assert ("correct" in tile["classes"]) == (label == query_label), (query_label, tile)
    # the hostile folder name is shown as text, never parsed as markup
    assert "b" not in dom.tags and any("<b>x&y" in f["text"] for f in queries + results)
    assert any(tag == "svg" for tag in dom.tags)

    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.float64)
    assert pixels.shape == (1600, 1200, 3)
    assert pixels.std() > 20 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 500


def test_console_check_catches_broken_pages(tmp_path):
    """The console check of the report test must be able to fail: a page with an undecodable
    image (reported by the report's own script) and a script error."""
    page = tmp_path / "broken.html"
    page.write_text(
        f'<!doctype html><img src="data:image/png;base64,AAAA" alt="bad"><script>{SCRIPT}</script><script>nope()</script>'
    )
    _, console = chromium(page, tmp_path / "profile", "--dump-dom")
    assert any("image failed to decode: bad" in line for line in console), console
    assert any("nope is not defined" in line for line in console), console


def test_report_without_spatial_weights_says_so(tmp_path):
    write_image_folder(tmp_path / "images", per_class=2)
    write_run(tmp_path / "run", pooling="gap")
    (tmp_path / "run" / "metrics.jsonl").unlink()
    run_cli(
        "report",
        tmp_path / "run",
        "--images",
        tmp_path / "images",
        "--queries",
        "3",
        "-k",
        "2",
        "--worst",
        "0",
        "--no-progress",
    )
    dom = Tiles()
    dom.feed((tmp_path / "run" / "report.html").read_text())
    heat = [f for f in dom.figures if "heatmap" in f["classes"]]
    assert len(heat) == 3 and not any(f["img"] for f in heat)
    # no curves (metrics.jsonl is gone): the one SVG is the embedding map
    assert (
        dom.tags.count("svg") == 1
        and len([f for f in dom.figures if "result" in f["classes"]]) == 6
    )


def bilinear_reference(grid, size):
    """Half-pixel-centred bilinear resize (align_corners=False), written as loops."""
    h, w = grid.shape
    out = np.zeros(size)
    for i in range(size[0]):
        for j in range(size[1]):
            y = min(max((i + 0.5) * h / size[0] - 0.5, 0), h - 1)
            x = min(max((j + 0.5) * w / size[1] - 0.5, 0), w - 1)
            y0, x0 = int(np.floor(y)), int(np.floor(x))
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            dy, dx = y - y0, x - x0
            out[i, j] = (
                grid[y0, x0] * (1 - dy) * (1 - dx)
                + grid[y0, x1] * (1 - dy) * dx
                + grid[y1, x0] * dy * (1 - dx)
                + grid[y1, x1] * dy * dx
            )
    return out


def test_heatmap_upsampling_matches_bilinear_reference():
    weights = torch.tensor([[0.05, 0.1, 0.05], [0.1, 0.4, 0.05], [0.05, 0.1, 0.1]])
    up = upsample_weights(weights, (12, 15))
    reference = bilinear_reference(weights.double().numpy(), (12, 15))
    np.testing.assert_allclose(up, reference / reference.max(), atol=1e-6)
    assert np.unravel_index(up.argmax(), up.shape) in {(5, 7), (6, 7)}


def test_choose_queries_visits_classes_in_turn():
    labels = ["a"] * 5 + ["b"] * 2 + ["c"] * 1
    chosen = choose_queries(labels, 6, seed=3)
    assert [labels[i] for i in chosen] == ["a", "b", "c", "a", "b", "a"] and len(set(chosen)) == 6
    assert choose_queries(labels, 20) and len(choose_queries(labels, 20)) == 8


def test_bad_metrics_line_names_file_and_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{oops\n{"step": 2}\n')
    with pytest.raises(DataError, match=r"metrics.jsonl:2"):
        read_metrics(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2, "lo')  # a torn last line
    with pytest.warns(RuntimeWarning, match=r"metrics.jsonl: the last line \(2\) is torn"):
        assert read_metrics(tmp_path) == [{"step": 1}]


def test_png_data_uri_round_trips_and_shrinks_large_images():
    image = np.random.default_rng(0).random((20, 30, 3))
    uri = png_data_uri(image)
    decoded = (
        np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))), dtype=np.float64)
        / 255
    )
    np.testing.assert_allclose(decoded, image, atol=0.5 / 255 + 1e-9)
    large = png_data_uri(np.zeros((400, 200, 1)), max_side=160)
    assert Image.open(io.BytesIO(base64.b64decode(large.split(",", 1)[1]))).size == (80, 160)


def test_report_on_unlabelled_images_marks_nothing(tmp_path):
    (tmp_path / "flat").mkdir()
    for path in write_image_folder(tmp_path / "nested", per_class=1):
        path.rename(tmp_path / "flat" / f"{path.parent.name}.png")
    write_run(tmp_path / "run")
    run_cli(
        "report",
        tmp_path / "run",
        "--images",
        tmp_path / "flat",
        "--queries",
        "2",
        "-k",
        "2",
        "--no-progress",
    )
    dom = Tiles()
    dom.feed((tmp_path / "run" / "report.html").read_text())
    results = [f for f in dom.figures if "result" in f["classes"]]
    assert len(results) == 4 and all(
        "unknown" in f["classes"] and "(no label)" in f["text"] for f in results
    )


def test_split_layouts_are_labelled_by_class_and_hidden_entries_skipped(tmp_path):
    from gspdml.retrieval.sources import list_image_folder

    write_image_folder(tmp_path / "split" / "train", classes=("red", "green"), per_class=2)
    write_image_folder(tmp_path / "split" / "test", classes=("blue",), per_class=2)
    write_image_folder(tmp_path / "split" / ".ipynb_checkpoints", classes=("red",), per_class=1)
    paths, labels, skipped = list_image_folder(tmp_path / "split")
    assert labels == ["blue", "blue", "green", "green", "red", "red"]
    assert skipped == [str((tmp_path / "split" / ".ipynb_checkpoints").resolve())]
    write_image_folder(
        tmp_path / "plain", classes=("train", "red"), per_class=1
    )  # a class named "train"
    assert list_image_folder(tmp_path / "plain")[1] == ["red", "train"]


def test_report_heatmaps_come_with_a_colour_bar(tmp_path):
    write_run(
        tmp_path / "run", pooling={"name": "gsp", "init": "random", "num_prototypes": 4, "iters": 5}
    )
    write_image_folder(tmp_path / "images", per_class=2)
    assert (
        run_cli("report", tmp_path / "run", "--images", tmp_path / "images", "--no-progress") == 0
    )
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert (
        page.count('class="colourbar"') == 1
        and "colour bar: weight / largest weight, 0 to 1" in page
    )


def test_report_shows_the_baselines_beside_the_test_metrics(tmp_path):
    write_image_folder(tmp_path / "images", per_class=2)
    write_run(tmp_path / "run", pooling="gap")
    results = {
        "test": {"map_at_r": 0.25, "precision_at_1": 0.5},
        "baseline": {"step0": {"map_at_r": 0.375, "precision_at_1": 0.625}},
    }
    (tmp_path / "run" / "results.json").write_text(json.dumps(results))
    run_cli("report", tmp_path / "run", "--images", tmp_path / "images", "--no-progress")
    page = (tmp_path / "run" / "report.html").read_text()
    assert "<h3>Test metrics beside the baselines</h3>" in page
    assert "<th>metric</th><th>trained</th><th>step0</th>" in page
    assert "<tr><td>map_at_r</td><td>0.2500</td><td>0.3750</td></tr>" in page


def write_trained_records(run_dir):
    """What training leaves beside the weights: data.json with class names that are not in the
    report's image folder (so they can only come from the record), a test record logged at the
    last step (100) while the weights are those of the best validation round (50)."""
    record = {
        "train": {"items": 40, "class_names": ["sneaker", "<boot>"], "num_files": 40},
        "test.query": {"items": 12, "class_names": ["red", "green", "blue"], "num_files": 12},
    }
    (run_dir / "data.json").write_text(json.dumps(record))
    with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as handle:
        test = {"step": 100, "split": "test", "final": True, "weights_step": 50}
        handle.write(json.dumps({**test, "map_at_r": 0.2, "precision_at_1": 0.5}) + "\n")
    results = {"steps": 100, "best_step": 50, "weights_step": 50, "test": {"map_at_r": 0.2}}
    (run_dir / "results.json").write_text(json.dumps(results))


def table_rows(page, table_id):
    """The cell texts of each body row of the table with ``id=table_id``."""
    body = page.split(f'id="{table_id}"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in body.split("</tr>") if "<td" in row]


def test_report_shows_split_classes_per_class_metrics_worst_queries_and_weights_step(tmp_path):
    # three classes of the same grey (only the noise differs): an untrained model confuses them
    paths = write_image_folder(tmp_path / "images", classes=("p", "q", "r"), per_class=4)
    write_run(tmp_path / "run", pooling="simpool")  # its data folder does not exist: not read
    write_trained_records(tmp_path / "run")
    run_cli(
        "report", tmp_path / "run", "--images", tmp_path / "images", "--worst", "3", "-k", "3",
        "--queries", "2", "--no-progress",
    )  # fmt: skip
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")

    # 1. the classes of each split, as recorded (escaped)
    assert "<tr><td>train</td><td>40</td><td>2</td><td>sneaker, &lt;boot&gt;</td></tr>" in page
    assert "<tr><td>test.query</td><td>12</td><td>3</td><td>red, green, blue</td></tr>" in page

    # 2. per-class metrics against a slow loop over the same embeddings, worst class first
    _, model, transform = load_model_and_transform(tmp_path / "run", torch.device("cpu"))
    labels = [p.parent.name for p in sorted(paths)]
    files = ImageFiles([str(p) for p in sorted(paths)], labels, transform)
    x = embed(model, files, batch_size=4)[0].double().numpy()
    per_query = [slow_query_scores(x, labels, i, (1, 2, 4, 8)) for i in range(len(labels))]
    rows = table_rows(page, "per-class")
    assert [row[0] for row in rows] and len(rows) == 3
    for name, images, map_r, r1, r_precision, r2, r4, r8 in rows:
        mine = [s for s, label in zip(per_query, labels) if label == name]
        assert int(images) == len(mine) == 4
        for shown, key in zip(
            (map_r, r1, r_precision, r2, r4, r8),
            (
                "map_at_r",
                "precision_at_1",
                "r_precision",
                "recall_at_2",
                "recall_at_4",
                "recall_at_8",
            ),
        ):
            assert float(shown) == pytest.approx(np.mean([s[key] for s in mine]), abs=6e-5), key
    assert [float(row[2]) for row in rows] == sorted(float(row[2]) for row in rows)
    assert len({row[2] for row in rows}) > 1  # the classes do differ: the order is tested

    # 3. the worst queries (lowest MAP@R by the slow loop), their neighbours marked by label
    worst = page.split('<div id="worst">', 1)[1].split('<div id="grid">', 1)[0]
    queries = re.findall(r'alt="query ([^"]+)"', worst)
    lowest = sorted(per_query[i]["map_at_r"] for i in range(len(labels)))[:3]
    by_path = {str(p): per_query[i]["map_at_r"] for i, p in enumerate(sorted(paths))}
    assert len(queries) == 3 and [by_path[q] for q in queries] == pytest.approx(lowest)
    for block in worst.split('<div class="row"')[1:]:
        query_label = Path(re.search(r'alt="query ([^"]+)"', block).group(1)).parent.name
        tiles = re.findall(
            r'<figure class="tile result (\w+)"><img src="data:image/png;base64,[^"]+" alt="([^"]+)"',
            block,
        )
        assert len(tiles) == 3
        assert all(
            (kind == "correct") == (Path(path).parent.name == query_label) for kind, path in tiles
        )

    # 4. the test marker sits at the step of the weights, and the page says so
    assert "are those of step 50: the best validation round" in page
    with pytest.raises(ConfigError, match="--worst: must be >= 0, got -1"):
        run_cli("report", tmp_path / "run", "--images", tmp_path / "images", "--worst", "-1")
    # self-contained: every image and link is inline (a data: URI or an anchor in the page)
    assert re.findall(r'(?:src|href)="(?!data:|#)|url\((?!#)', page) == []


def test_test_metrics_are_drawn_at_the_step_of_the_weights():
    rows = [
        {"step": 50, "split": "val", "map_at_r": 0.4},
        {"step": 100, "split": "val", "map_at_r": 0.3},
        {"step": 100, "split": "test", "final": True, "map_at_r": 0.35, "precision_at_1": 0.6},
    ]
    series = curve_series(rows, selected_step=50)
    assert series[("test", "map_at_r")] == [(50, 0.35)] and series[("test", "precision_at_1")] == [
        (50, 0.6)
    ]
    assert series[("val", "map_at_r")] == [(50, 0.4), (100, 0.3)]
    assert curve_series(rows)[("test", "map_at_r")] == [(100, 0.35)]  # no step known: as logged
    svg = training_curves_svg(rows, selected_step=50)
    assert "weights: step 50" in svg
    results = {"steps": 100, "best_step": 50}  # a run from before weights_step was recorded
    assert weights_step(results, True) == 50
    assert weights_step(results, False) == 100
    assert (
        weights_step({**results, "weights_step": 70}, True) == 70
        and weights_step(None, True) is None
    )
