"""``gspdml reproduce simpool-table3.5`` (localisation, MaxBoxAccV2), ``simpool-table3.6``
(object discovery, DINO-seg CorLoc) and ``simpool-table3.7`` (ImageNet-9 background robustness)
end to end through the CLI, on tiny trees in the official layouts (tests/helpers/box_datasets.py)
with the released ViT-S files written in the authors' layouts around a tiny random ViT (width 64,
one head, 3 x 3 patches of 16: tests/workflows/test_reproduce_simpool.py).

Cross-checks: the attention maps are recomputed here independently of gspdml's ViT: the
Baseline's [CLS] attention read from timm's own ViT with the same weights (its attention
dropout's input, the unfused path), SimPool's attention written out in float64 from the
authors' weights (Psomas thesis Eqs. 3.62-3.65); they are scored by the metric that
tests/evaluation/test_localisation.py holds to a slow loop, and by a slow DINO-seg box and IoU.
ImageNet-9: the released head applied here to the pooled vector, its top-1 class mapped to the
9 classes. A second call evaluates nothing.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from gspdml.cli import main
from gspdml.data.imagenet9 import IN_TO_IN9, VARIATIONS
from gspdml.data.recipes import IMAGENET_MEAN, IMAGENET_STD
from gspdml.evaluation.localisation import MaxBoxAccV2, normalised_scoremap
from gspdml.models import simpool_release
from gspdml.models.attention_maps import _positions
from gspdml.models.simpool_release import released_embedder
from gspdml.workflows.reproduce import get_table
from tests.helpers.box_datasets import (
    make_coco20k,
    make_cub_boxes,
    make_imagenet9,
    make_imagenet_boxes,
    make_voc,
)
from tests.helpers.box_reference import iou, slow_dino_seg_box, slow_lost_box
from tests.workflows.test_reproduce_simpool import CROP, VITS, _authors_vit, _timm_vit

#: the released ViT-S file of each (supervision, method) and its seed here
FILES = {
    ("DINO", "Baseline"): ("vits_dino_official_ep100.pth", 3),
    ("DINO", "SimPool"): ("vits_dino_simpool_ep100.pth", 4),
    ("Supervised", "Baseline"): ("vits_supervised_official_ep100.pth.tar", 5),
    ("Supervised", "SimPool"): ("vits_gem1.25_supervised_beta.pth.tar", 6),
}
BASE = ("Baseline", "SimPool")
#: one ImageNet class of each ImageNet-9 class: the classes the tiny classifier can predict
REPRESENTATIVES = [IN_TO_IN9.index(c) for c in range(9)]


def _classifier(seed):
    torch.manual_seed(100 + seed)
    weight = torch.zeros(1000, 64)
    bias = torch.full((1000,), -1e4)
    weight[REPRESENTATIVES] = torch.randn(9, 64)
    bias[REPRESENTATIVES] = 0.1 * torch.randn(9)
    return weight, bias


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """(data root, checkpoints, {file: (layout, method, state)})."""
    root = tmp_path_factory.mktemp("tasks")
    data = root / "data"
    make_cub_boxes(data, size=(60, 40))
    make_imagenet_boxes(data, size=(50, 40))
    make_voc(data, "2007", count=4, size=(44, 40))  # padded to 48 x 48: the 3 x 3 grid
    make_imagenet9(data, per_class=1, size=(CROP, CROP))
    make_coco20k(data, count=2, size=(CROP, CROP))
    checkpoints = root / "checkpoints"
    checkpoints.mkdir()
    states = {}
    for name, seed in FILES.values():
        layout, method = VITS[name]
        checkpoint, state = _authors_vit(layout, method, seed=seed)
        if layout == "timm":  # an ImageNet-1k classifier
            weight, bias = _classifier(seed)
            checkpoint["state_dict"].update({"head.weight": weight, "head.bias": bias})
        torch.save(checkpoint, checkpoints / name)
        states[name] = (layout, method, state, seed)
    return data, checkpoints, states


def _reproduce(table, data, output, *settings, rows=()):
    argv = ["reproduce", table, *settings, "--data-root", str(data), "--output-dir", str(output)]
    assert main(argv + (["--rows", *rows] if rows else [])) == 0
    return {
        e["key"]: e for e in json.loads((output / "tables" / f"{table}.json").read_text())["rows"]
    }


def _pixels(image, supervised=False):
    """The image normalised as the release was trained: by 0.5 (timm's ViT configs) for the
    supervised files, ImageNet's mean and std (DINO's) otherwise."""
    array = torch.from_numpy(np.asarray(image, dtype=np.float64) / 255).permute(2, 0, 1)
    mean, std = ((0.5,) * 3, (0.5,) * 3) if supervised else (IMAGENET_MEAN, IMAGENET_STD)
    return ((array - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)).float()


def _reference_maps(name, states, images):
    """The attention maps ``[B, 3, 3]`` of the released file ``name`` (module doc)."""
    layout, method, state, seed = states[name]
    vit = _timm_vit(method == "cls", seed)
    prefix = "simpool." if layout == "dino" else "gp.pool."
    vit.load_state_dict({k: v for k, v in state.items() if not k.startswith(prefix)})
    seen = {}
    if method == "cls":
        vit.blocks[-1].attn.fused_attn = False
        vit.blocks[-1].attn.attn_drop.register_forward_hook(lambda m, i, o: seen.update(a=o))
        with torch.no_grad():
            vit.forward_features(images)
        return seen["a"][:, :, 0, 1:].mean(dim=1).reshape(-1, 3, 3)
    vit.blocks.register_forward_hook(lambda m, i, o: seen.update(x=o))
    with torch.no_grad():
        normed = vit.forward_features(images)
    tokens = (seen["x"] if layout == "dino" else normed).double()  # the DINO fork pools pre-norm
    w = {k[len(prefix) :]: v.double() for k, v in state.items() if k.startswith(prefix)}
    maps = []
    for x in tokens:
        mean, var = x.mean(1, keepdim=True), x.var(1, unbiased=False, keepdim=True)
        ln = (x - mean) / torch.sqrt(var + 1e-6) * w["norm_patches.weight"] + w["norm_patches.bias"]
        q, k = w["wq.weight"] @ x.mean(0), ln @ w["wk.weight"].T
        maps.append(torch.softmax(k @ q / math.sqrt(x.shape[1]), dim=0).reshape(3, 3))
    return torch.stack(maps)


def _clipped(box, width=44, height=40):
    """LOST's box within the image it padded."""
    return box[0], box[1], min(box[2], width), min(box[3], height)


def _reference_keys(name, states, images):
    """The keys ``[B, 9, 64]`` of the patch tokens in timm's last block, read from its qkv."""
    layout, method, state, seed = states[name]
    vit = _timm_vit(method == "cls", seed)
    prefix = "simpool." if layout == "dino" else "gp.pool."
    vit.load_state_dict({k: v for k, v in state.items() if not k.startswith(prefix)})
    seen = {}
    vit.blocks[-1].attn.qkv.register_forward_hook(lambda m, i, o: seen.update(qkv=o))
    with torch.no_grad():
        vit.forward_features(images)
    keys = seen["qkv"][..., 64:128]  # [q | k | v], one head
    return keys[:, 1:] if method == "cls" else keys


def test_table_3_5_maxboxacc_v2_of_reference_attention_maps_and_reuse(
    release, tmp_path, monkeypatch
):
    from gspdml.data.cub_boxes import read_cub_boxes
    from gspdml.data.imagenet_boxes import read_imagenet_boxes

    data, checkpoints, states = release
    table = get_table("simpool-table3.5")
    out = tmp_path / "out"
    entries = _reproduce(table.key, data, out, f"checkpoints={checkpoints}", f"size={CROP}")
    assert len(table.runnable) == 8 and {r.label.split("@")[0] for r in table.runnable} == {
        f"{s}/{m}" for s in ("Supervised", "DINO") for m in ("Baseline", "SimPool")
    }
    readers = {
        "cub": lambda: read_cub_boxes(str(data / "CUB_200_2011")),
        "imagenet": lambda: read_imagenet_boxes(str(data / "imagenet")),
    }
    for row in table.rows:
        entry = entries[row.key]
        if row.frozen is None:
            assert entry["status"] == f"missing: {row.missing}" and "@20" in row.label
            continue
        supervision, method = row.label.split("/")
        items = readers[row.dataset]()
        images, metric = [], MaxBoxAccV2()
        for item in items:
            image = Image.open(item.path).convert("RGB")
            scale = np.array([CROP / image.width, CROP / image.height] * 2)
            resized = image.resize((CROP, CROP), Image.Resampling.BILINEAR)
            images.append(_pixels(resized, supervision == "Supervised"))
            item.boxes[:] = np.floor(item.boxes * scale)
        maps = _reference_maps(FILES[supervision, method][0], states, torch.stack(images))
        for attention, item in zip(maps, items):
            metric.add(normalised_scoremap(attention, (CROP, CROP)), item.boxes)
        (title,) = row.paper
        cell = entry["cells"][title]
        assert entry["status"] == "evaluated"
        assert cell["ours"] == pytest.approx(100 * metric.value(), abs=1e-9)
        assert cell["paper"] == row.paper[title].value
    assert entries["cub/Supervised/SimPool"]["cells"]["Sup CUB"]["paper"] == 77.9  # as printed
    assert entries["imagenet/DINO/Baseline@20"]["cells"]["DINO ImageNet"]["paper"] == 52.5

    def refuse(*args, **kwargs):
        raise AssertionError("a stored evaluation was run again")

    monkeypatch.setattr(simpool_release, "released_embedder", refuse)
    again = _reproduce(table.key, data, out, f"checkpoints={checkpoints}", f"size={CROP}")
    assert again == entries


def test_table_3_6_corloc_of_slow_dino_seg_boxes(release, tmp_path):
    from gspdml.data.voc import read_voc_boxes

    data, checkpoints, states = release
    table = get_table("simpool-table3.6")
    settings = [f"checkpoints={checkpoints}", "seg_head=0"]
    entries = _reproduce(table.key, data, tmp_path / "out", *settings, rows=["voc07/*"])
    items = read_voc_boxes(str(data / "VOCdevkit"), "2007")
    images = torch.zeros(len(items), 3, 48, 48)  # zero-padded after the normalisation
    images[:, :, :40, :44] = torch.stack(
        [_pixels(Image.open(i.path).convert("RGB")) for i in items]
    )
    every = []  # each image's hit, every method and model
    for method in ("Baseline", "SimPool"):
        maps = _reference_maps(FILES["DINO", method][0], states, images)
        hits = [
            max(iou(slow_dino_seg_box(m.tolist(), 16), tuple(b), False) for b in item.boxes) >= 0.5
            for m, item in zip(maps, items)
        ]
        every += hits
        cell = entries[f"voc07/DINO-seg/{method}"]["cells"]["DINO-seg VOC07"]
        assert cell["ours"] == pytest.approx(100 * sum(hits) / len(hits), abs=1e-9)
        keys = _reference_keys(FILES["DINO", method][0], states, images)
        hits = [
            max(
                iou(_clipped(slow_lost_box(f.tolist(), 3, 3, 16)), tuple(b), False)
                for b in item.boxes
            )
            >= 0.5
            for f, item in zip(keys, items)
        ]
        every += hits
        cell = entries[f"voc07/LOST/{method}"]["cells"]["LOST VOC07"]
        assert cell["ours"] == pytest.approx(100 * sum(hits) / len(hits), abs=1e-9)
    assert 0 < sum(every) < len(every)  # boxes that hit and miss: the check can fail
    runnable = {row.key for row in table.runnable}
    assert runnable == {
        f"{d}/{f}/{m}"
        for d in ("voc07", "voc12", "coco20k")
        for f in ("DINO-seg", "LOST")
        for m in BASE
    }
    # COCO-20k runs by the same code: one row here, its CorLoc a fraction of its 2 images
    coco = _reproduce(table.key, data, tmp_path / "out", *settings, rows=["coco20k/LOST/SimPool"])
    assert coco["coco20k/LOST/SimPool"]["cells"]["LOST COCO"]["ours"] in (0.0, 50.0, 100.0)
    assert entries["voc12/DINO-seg/Baseline"]["status"] == "not selected"
    assert entries["coco20k/LOST/SimPool"]["status"] == "not selected"
    assert entries["coco20k/DINO-seg/SimPool"]["cells"]["DINO-seg COCO"]["paper"] == 43.4


def test_table_3_7_in9_accuracy_of_the_released_classifier(release, tmp_path):
    from gspdml.data.imagenet9 import read_imagenet9

    data, checkpoints, states = release
    table = get_table("simpool-table3.7")
    entries = _reproduce(
        table.key, data, tmp_path / "out", f"checkpoints={checkpoints}", f"size={CROP}"
    )
    for method in ("Baseline", "SimPool"):
        name, seed = FILES["Supervised", method]
        layout, pooling, _, _ = states[name]
        model = released_embedder(checkpoints / name, pooling, backbone="vit", gamma=1.25)
        weight, bias = _classifier(seed)
        entry = entries[f"imagenet-9/Supervised/{method}"]
        accuracy = {}
        for title, folder in VARIATIONS.items():
            items = read_imagenet9(str(data), folder)
            images = torch.stack([_pixels(Image.open(p).convert("RGB"), True) for p, _ in items])
            with torch.no_grad():
                logits = model(images).pooled.double() @ weight.double().T + bias.double()
            predicted = [IN_TO_IN9[int(c)] for c in logits.argmax(dim=1)]
            accuracy[title] = sum(p == label for p, (_, label) in zip(predicted, items)) / len(
                items
            )
            assert entry["cells"][title]["ours"] == pytest.approx(100 * accuracy[title], abs=1e-9)
        stored = json.loads(Path(entry["runs"]["imagenet-9"]).read_text())["settings"]
        assert stored["normalisation"] == "inception"  # timm's ViT config, as trained
        gap = entry["cells"]["BG-gap"]
        assert gap["ours"] == pytest.approx(100 * (accuracy["MS"] - accuracy["MR"]), abs=1e-9)
        assert gap["paper"] is None
    assert entries["imagenet-9/DINO/SimPool"]["status"].startswith("missing: the DINO rows")
    assert entries["imagenet-9/DINO/SimPool"]["cells"]["NF"]["paper"] == 48.2


def test_a_dino_file_has_no_classifier_and_position_embeddings_follow_the_grid(
    release, tmp_path, capsys
):
    data, checkpoints, _ = release
    table = get_table("simpool-table3.7")
    dino = checkpoints / FILES["DINO", "Baseline"][0]
    argv = ["reproduce", table.key, f"checkpoint={dino}", f"size={CROP}", "--data-root", str(data)]
    argv += ["--output-dir", str(tmp_path), "--rows", "imagenet-9/Supervised/Baseline"]
    assert main(argv) != 0
    assert "no linear classifier head.weight" in capsys.readouterr().err
    assert main(["reproduce", "simpool-table3.6", "head=first", "--data-root", str(data)]) != 0
    assert "expected mean or a head number" in capsys.readouterr().err
    # DINO's interpolation: the 3 x 3 grid kept as it is, a 3 x 4 grid resampled from it
    model = released_embedder(dino, "cls", backbone="vit")
    vit = model.backbone
    assert _positions(vit, 3, 3) is vit.pos_embed
    wide = _positions(vit, 3, 4)
    assert wide.shape == (1, 1 + 12, 64) and torch.equal(wide[:, 0], vit.pos_embed[:, 0])
    grid = vit.pos_embed[0, 1:].reshape(3, 3, 64)
    resampled = wide[0, 1:].reshape(3, 4, 64)
    assert torch.allclose(resampled[:, 0], grid[:, 0], atol=0.3)  # the left column stays left
