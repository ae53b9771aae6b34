"""Psomas thesis Table 3.8 (``gspdml reproduce simpool-table3.8``, protocol ``revisited``) end
to end through the CLI, on a tiny revisited Oxford tree in the official layout
(tests/helpers/revisited.py) and random released-layout DINO checkpoints.

Cross-check: the table's Easy, Medium and Hard mAP are recomputed here from the checkpoint by
a slow path of their own: the query boxes sliced from the files' pixels, each image embedded
alone, and the AP of each query by a loop over its ranking in the manner of the official
revisitop ``compute_ap`` (positives' ranks after the junk is taken out, trapezoidal precision).
"""

import json
import os
import pickle
import re

import numpy as np
import pytest
import torch
from PIL import Image

from gspdml.cli import main
from gspdml.data.recipes import IMAGENET_MEAN, IMAGENET_STD
from gspdml.models.backbones.timm_backbone import import_timm
from gspdml.models.released_vit import ReleasedViT, ViTShape
from gspdml.models.simpool_release import released_embedder
from tests.helpers.revisited import DATABASE, GROUND_TRUTH, QUERIES, make_revisited
from tests.workflows.test_reproduce_simpool import _authors_resnet, _authors_vit, _dino_checkpoint

TABLE = "simpool-table3.8"
#: the revisitop protocols: (positives, removed from the ranking)
PROTOCOLS = {
    "Easy": (("easy",), ("junk", "hard")),
    "Medium": (("easy", "hard"), ("junk",)),
    "Hard": (("hard",), ("junk", "easy")),
}


def _slow_ap(ranking, positives, removed):
    """revisitop's compute_ap: the 0-based ranks of the positives among the kept images,
    precision before and after each one averaged (trapezoid), over the positives."""
    kept = [i for i in ranking if i not in removed]
    ranks = [r for r, i in enumerate(kept) if i in positives]
    ap = 0.0
    for j, rank in enumerate(ranks):
        before = 1.0 if rank == 0 else j / rank
        after = (j + 1) / (rank + 1)
        ap += (before + after) / 2 / len(ranks)
    return ap


def _pixels(path, box=None):
    image = np.asarray(Image.open(path).convert("RGB"))
    if box is not None:
        x1, y1, x2, y2 = (int(v) for v in box)
        image = image[y1:y2, x1:x2]
    tensor = torch.from_numpy(image.astype(np.float32) / 255).permute(2, 0, 1)
    mean, std = (
        torch.tensor(IMAGENET_MEAN)[:, None, None],
        torch.tensor(IMAGENET_STD)[:, None, None],
    )
    return ((tensor - mean) / std)[None]


def _slow_maps(folder, model):
    """The three mAP (percent) of ``model`` on the release in ``folder``: images at full size
    (64 x 48 is within the 64 pixels of the run)."""
    with torch.no_grad():
        database = [model(_pixels(folder / "jpg" / f"{n}.jpg")).embedding[0] for n in DATABASE]
        queries = [
            model(_pixels(folder / "jpg" / f"{n}.jpg", gt["bbx"])).embedding[0]
            for n, gt in zip(QUERIES, GROUND_TRUTH)
        ]
    maps = {}
    for title, (positive, removed) in PROTOCOLS.items():
        aps = []
        for query, gt in zip(queries, GROUND_TRUTH):
            scores = [float(torch.dot(query.double(), d.double())) for d in database]
            ranking = sorted(range(len(database)), key=lambda i: -scores[i])
            good = {i for label in positive for i in gt[label]}
            if good:
                out = {i for label in removed for i in gt[label]} - good
                aps.append(_slow_ap(ranking, good, out))
        maps[title] = 100 * sum(aps) / len(aps)
    return maps


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("revisited")
    folder = make_revisited(root / "data")
    checkpoint = root / "resnet50_dino_simpool_ep100.pth"
    torch.save(_dino_checkpoint(_authors_resnet(True, seed=2)), checkpoint)
    return root / "data", folder, checkpoint


@pytest.mark.slow
def test_a_resnet_row_runs_and_its_maps_are_the_slow_ones(release, tmp_path, capsys):
    data, folder, checkpoint = release
    argv = ["reproduce", TABLE, "--rows", "roxford5k/ResNet-50/SimPool", "--data-root", str(data)]
    argv += ["--output-dir", str(tmp_path), f"checkpoint={checkpoint}", "imsize=64"]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "| roxford5k/ResNet-50/SimPool | resnet50 + simpool γ=2, " in out and "to run" in out
    assert main(argv) == 0
    payload = json.loads((tmp_path / "tables" / f"{TABLE}.json").read_text())
    entries = {entry["key"]: entry for entry in payload["rows"]}
    entry = entries["roxford5k/ResNet-50/SimPool"]
    assert entry["status"] == "evaluated"
    assert entries["rparis6k/ResNet-50/SimPool"]["status"] == "not selected"
    model = released_embedder(checkpoint, "simpool", gamma=2.0)
    expected = _slow_maps(folder, model)
    cells = entry["cells"]
    for title, value in expected.items():
        assert cells[title]["ours"] == pytest.approx(value, rel=1e-6, abs=1e-9), title
    assert (cells["Medium"]["paper"], cells["Hard"]["paper"], cells["Easy"]["paper"]) == (
        29.7,
        8.7,
        None,
    )
    assert cells["Medium"]["diff"] == pytest.approx(cells["Medium"]["ours"] - 29.7)
    (stored,) = (tmp_path / "revisited" / "roxford5k").glob("*.json")
    counts = json.loads(stored.read_text())["result"]["counts"]
    assert counts == {**entry["benchmark"], "root": str(folder)} and not counts["is_benchmark"]
    assert entry["verdict"] == "not the benchmark, no verdict"
    markdown = (tmp_path / "tables" / f"{TABLE}.md").read_text()
    assert "6 database images and 2 queries, not ROxford5k (4,993 database images, 70 queries)" in (
        markdown
    )
    assert main([*argv, "--dry-run"]) == 0 and "stored" in capsys.readouterr().out


@pytest.mark.slow
def test_a_vit_row_embeds_images_of_any_size(release, tmp_path):
    """The DINO ViT-S SimPool row on non-square images: the position embeddings are
    interpolated to each image's grid; ours equals the slow path's with the same model."""
    data, folder, _ = release
    checkpoint = tmp_path / "vits_dino_simpool_ep100.pth"
    torch.save(_authors_vit("dino", "simpool", seed=5)[0], checkpoint)
    argv = ["reproduce", TABLE, "--rows", "roxford5k/ViT-S/SimPool", "--data-root", str(data)]
    argv += ["--output-dir", str(tmp_path), f"checkpoints={tmp_path}", "imsize=64"]
    assert main(argv) == 0
    payload = json.loads((tmp_path / "tables" / f"{TABLE}.json").read_text())
    (entry,) = [e for e in payload["rows"] if e["status"] == "evaluated"]
    model = released_embedder(
        checkpoint, "simpool", backbone="vit", gamma=1.25, pooled_norm=True, any_size=True
    )
    for title, value in _slow_maps(folder, model).items():
        assert entry["cells"][title]["ours"] == pytest.approx(value, rel=1e-6, abs=1e-9)


def test_vit_positions_are_interpolated_as_timm_resamples_them():
    """On the released grid the positions are the stored ones; on another grid the patches'
    are timm's bicubic resampling of them (without antialiasing), the [CLS] one unchanged."""
    torch.manual_seed(0)
    vit = ReleasedViT(ViTShape(64, 1, 16, 3, True), "cls", final_norm=True, any_size=True)
    vit.pos_embed.data = torch.randn_like(vit.pos_embed)
    assert vit.positions(48, 48) is vit.pos_embed
    resample = import_timm().layers.resample_abs_pos_embed
    for height, width in ((64, 32), (80, 50)):
        expected = resample(
            vit.pos_embed, [height // 16, width // 16], num_prefix_tokens=1, antialias=False
        )
        assert torch.allclose(vit.positions(height, width), expected, atol=1e-6)
        assert vit(torch.zeros(1, 3, height, width)).shape == (1, 1, 64)
    with pytest.raises(ValueError, match="set the crop to 48"):
        ReleasedViT(ViTShape(64, 1, 16, 3, True), "cls", final_norm=True)(torch.zeros(1, 3, 64, 32))


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_ground_truth_that_would_run_code_stops_the_run_naming_the_file(tmp_path, capsys):
    folder = make_revisited(tmp_path / "data")
    marker = tmp_path / "ran"
    with open(folder / "gnd_roxford5k.pkl", "wb") as file:
        pickle.dump({"imlist": DATABASE, "qimlist": QUERIES, "gnd": [_RunsCode(marker)]}, file)
    checkpoint = tmp_path / "resnet50_dino_official_ep100.pth"
    checkpoint.write_bytes(b"never read: the ground truth is read first")
    argv = ["reproduce", TABLE, "--rows", "roxford5k/ResNet-50/Baseline"]
    argv += ["--data-root", str(tmp_path / "data"), "--output-dir", str(tmp_path)]
    assert main([*argv, f"checkpoint={checkpoint}"]) != 0
    err = capsys.readouterr().err
    assert "gspdml: error" in err and "gnd_roxford5k.pkl: refused to load" in err
    assert re.search(r"(posix|os)\.system", err) and not marker.exists()
