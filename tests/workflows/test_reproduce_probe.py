"""``gspdml reproduce simpool-table3.2`` and ``simpool-table3.3`` (Psomas thesis Tables 3.2 and
3.3, protocol ``probe``) end to end through the CLI, on a tiny ImageNet-1k tree in the
official layout (flat ``val/`` labelled by ``LOC_val_solution.csv``), with checkpoints in the
layouts of the SimPool authors' releases around random weights (tests/workflows/
test_reproduce_simpool.py): the DINO ResNet-50 and ViT-S files, and the supervised ViT-S files
with their classifier ``head``.

Cross-checks: each row's numbers are recomputed here from the loaded model's features of every
image (one batch, read by the reader independently of the protocol's loader): the k-NN column
by the slow loop of tests/evaluation/test_knn_classifier.py, the top-1 of the released
classifier by its logits in float64, the probe by the probe (tested on its own against
scikit-learn) trained on these features; a second call evaluates nothing."""

import json

import numpy as np
import pytest
import torch

from gspdml.cli import main
from gspdml.data.imagenet import read_imagenet
from gspdml.data.recipes import image_transform
from gspdml.evaluation.linear_probe import ProbeSettings, linear_probe_top1
from gspdml.models import simpool_release
from gspdml.models.released_classifier import released_classifier
from gspdml.models.simpool_release import released_embedder
from gspdml.workflows.reproduce import get_table
from tests.evaluation.test_knn_classifier import _slow_predict
from tests.helpers.datasets import make_imagenet, write_image
from tests.workflows.test_reproduce_simpool import (
    SIMPOOL,
    VITS,
    _authors_resnet,
    _authors_vit,
    _dino_checkpoint,
)

SIZES = ["resize=56", "crop=48"]
#: a short probe and a k within the 12 training images
CLASSIFIERS = ["knn_k=5", "knn_temperature=0.1", "probe_epochs=4", "probe_lr=0.05"]
CLASSIFIERS += ["probe_batch_size=4"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The data root with ImageNet (3 classes, 4 training and 2 validation images each) and a
    folder of the released ViT-S files (random weights, the authors' layouts)."""
    root = tmp_path_factory.mktemp("probe")
    make_imagenet(root / "data" / "imagenet", write_image, classes=3, val="solution")
    checkpoints = root / "checkpoints"
    checkpoints.mkdir()
    for seed, (name, (layout, method)) in enumerate(VITS.items()):
        torch.save(_authors_vit(layout, method, seed=3 + seed)[0], checkpoints / name)
    return root / "data", checkpoints


def _reproduce(table, data, output, *settings, rows=()):
    argv = ["reproduce", table, *settings, "--data-root", str(data), "--output-dir", str(output)]
    assert main(argv + (["--rows", *rows] if rows else [])) == 0
    return json.loads((output / "tables" / f"{table}.json").read_text())


def _features(model, images):
    """The pooled vectors (before L2 normalisation) of ``images``, in one batch."""
    transform = image_transform("center", resize=56, crop=48)
    dataset = images.dataset(transform)
    batch = torch.stack([dataset[i][0] for i in range(len(dataset))])
    with torch.no_grad():
        return model(batch).pooled.float(), torch.as_tensor(images.labels)


def _model(checkpoints, spec):
    return released_embedder(
        checkpoints / spec.checkpoint,
        spec.pooling,
        backbone=spec.backbone,
        gamma=spec.gamma,
        pooled_norm=spec.pooled_norm,
    )


@pytest.mark.slow
def test_table_3_3_equals_the_slow_knn_and_the_probe_and_is_reused(release, tmp_path, monkeypatch):
    data, checkpoints = release
    table = get_table("simpool-table3.3")
    # the DINO ResNet-50 SimPool model (the baseline's file, one more ResNet-50, is left out)
    torch.save(_dino_checkpoint(_authors_resnet(True, seed=2)), checkpoints / SIMPOOL)
    settings = [f"checkpoints={checkpoints}", *SIZES, *CLASSIFIERS]
    selected = ["imagenet/ViT-S/*", "imagenet/ResNet-50/SimPool", "imagenet/ConvNeXt-S/*"]
    payload = _reproduce("simpool-table3.3", data, tmp_path / "out", *settings, rows=selected)
    entries = {entry["key"]: entry for entry in payload["rows"]}
    assert list(entries) == [row.key for row in table.rows]
    assert entries["imagenet/ResNet-50/Baseline"]["status"] == "not selected"
    released = {row.label for row in table.rows if row.frozen is not None}
    networks, methods = ("ResNet-50", "ViT-S"), ("Baseline", "SimPool")
    assert released == {f"{network}/{method}" for network in networks for method in methods}
    runnable = [
        row
        for row in table.rows
        if row.frozen is not None and entries[row.key]["status"] != "not selected"
    ]
    assert len(runnable) == 3
    imagenet = read_imagenet(data / "imagenet")
    probe = ProbeSettings(epochs=4, batch_size=4, lr=0.05)
    for row in runnable:
        entry = entries[row.key]
        assert entry["status"] == "evaluated"
        model = _model(checkpoints, row.frozen)
        train, train_labels = _features(model, imagenet.train)
        val, val_labels = _features(model, imagenet.val)
        predicted = _slow_predict(train.numpy(), train_labels.numpy(), val.numpy(), 5, 0.1)
        knn = float(np.mean(np.asarray(predicted) == val_labels.numpy()))
        linear = linear_probe_top1(train, train_labels, val, val_labels, probe)
        cells = entry["cells"]
        assert cells["k-NN"]["ours"] == pytest.approx(100 * knn, abs=1e-9), row.key
        assert cells["Prob"]["ours"] == pytest.approx(100 * linear, abs=1e-9), row.key
        for title in ("k-NN", "Prob"):
            assert cells[title]["paper"] == row.paper[title].value
            assert cells[title]["diff"] == pytest.approx(
                cells[title]["ours"] - cells[title]["paper"]
            )
    for row in table.rows:
        if row.frozen is None:
            assert entries[row.key]["status"] == f"missing: {row.missing}"
            assert row.label.startswith("ConvNeXt-S/")
    # the printed numbers, transcribed a second time
    assert entries["imagenet/ResNet-50/SimPool"]["cells"]["k-NN"]["paper"] == 63.8
    assert entries["imagenet/ViT-S/Baseline"]["cells"]["Prob"]["paper"] == 71.5

    def refuse(*args, **kwargs):
        raise AssertionError("a stored evaluation was run again")

    monkeypatch.setattr(simpool_release, "released_embedder", refuse)
    again = _reproduce("simpool-table3.3", data, tmp_path / "out", *settings, rows=selected)
    assert again["rows"] == payload["rows"]


def test_table_3_2_evaluates_the_classifier_of_the_supervised_release(release, tmp_path, capsys):
    data, checkpoints = release
    table = get_table("simpool-table3.2")
    hidden = data / "imagenet" / "val" / ".preview.JPEG"  # a hidden file: left out, and said
    write_image(hidden)
    payload = _reproduce(
        "simpool-table3.2", data, tmp_path / "out", f"checkpoints={checkpoints}", *SIZES
    )
    entries = {entry["key"]: entry for entry in payload["rows"]}
    runnable = [row for row in table.rows if row.frozen is not None]
    assert [row.label for row in runnable] == ["ViT-S/Baseline@100", "ViT-S/SimPool@100"]
    imagenet = read_imagenet(data / "imagenet")
    for row in runnable:
        file = checkpoints / row.frozen.checkpoint
        stored = torch.load(file, weights_only=False)["state_dict"]
        val, labels = _features(_model(checkpoints, row.frozen), imagenet.val)
        logits = val.double() @ stored["head.weight"].double().T + stored["head.bias"].double()
        expected = float((logits.argmax(1) == labels).double().mean())
        cell = entries[row.key]["cells"]["Top-1"]
        assert cell["ours"] == pytest.approx(100 * expected, abs=1e-9)
    assert entries["imagenet/ViT-S/Baseline@100"]["cells"]["Top-1"]["paper"] == 72.7
    assert entries["imagenet/ViT-S/SimPool@100"]["cells"]["Top-1"]["paper"] == 74.3
    # every printed number is a row; the others say why they cannot run
    assert len(table.rows) == 23
    assert {e["status"] for k, e in entries.items() if "ViT-S/" not in k or "@300" in k} == {
        f"missing: {row.missing}" for row in table.rows if row.frozen is None
    }
    assert f"left out 1 hidden entries ({hidden})" in capsys.readouterr().err
    # a DINO file holds no classifier: its head is the projection head
    assert released_classifier(checkpoints / "vits_dino_official_ep100.pth") is None


def test_errors_name_the_file_and_the_setting(release, tmp_path, capsys):
    data, checkpoints = release
    out = tmp_path / "out"

    def error(table, *settings, rows=()):
        argv = ["reproduce", table, *settings, "--data-root", str(data), "--output-dir", str(out)]
        assert main(argv + (["--rows", *rows] if rows else [])) != 0
        return capsys.readouterr().err

    text = error("simpool-table3.3", rows=["imagenet/ResNet-50/*"])  # no checkpoint given
    assert "evaluates the released resnet50_dino_official_ep100.pth: download it from" in text
    assert "fraction" in error("simpool-table3.3", "fraction=2")
    assert "knn_temperature" in error("simpool-table3.3", "knn_temperature=warm")
    assert "a probe table takes key=value settings" in error("simpool-table3.3", "k=3")
    # the supervised row given a DINO file: it holds no classifier
    dino = f"checkpoint={checkpoints / 'vits_dino_official_ep100.pth'}"
    text = error("simpool-table3.2", dino, *SIZES, rows=["imagenet/ViT-S/Baseline@100"])
    assert "vits_dino_official_ep100.pth: holds no classifier" in text
    assert main(["reproduce", "simpool-table3.3", "--dry-run", "--data-root", str(data)]) == 0
    text = capsys.readouterr().out
    assert "4 runnable" in text and "weighted k-NN, linear probe" in text
    assert "| imagenet/ResNet-50/Baseline | 61.80 | 63.00 |" in text
