"""The ``classify`` tables end to end through the CLI (Psomas thesis Table 3.12: ResNet-18 with a
SimPool variant on ImageNet-20%; Table 3.4: a released ViT-S fine-tuned on Oxford Flowers-102),
each on a tiny tree in its dataset's official layout, one epoch.

Cross-check: "ours" in the written table is recomputed here from the run's own checkpoint,
loaded into a classifier built by hand, and the test images classified one by one with the
first largest logit taken by a Python loop; the paper's number is transcribed a second time.
"""

import json

import pytest
import torch

from gspdml.cli import main
from gspdml.data.class_folders import read_class_folders
from gspdml.data.classification import classification_transforms
from gspdml.data.flowers102 import read_flowers102
from gspdml.data.images import load_image
from gspdml.models.backbones import build_backbone
from gspdml.models.simpool_release import released_embedder
from gspdml.pooling import build_pooling
from gspdml.training.checkpoint import load_state
from gspdml.workflows.classification import CHECKPOINT, Classifier
from gspdml.workflows.reproduce import get_table
from gspdml.workflows.reproduce.classify_run import CLASSIFY
from gspdml.workflows.reproduce.report import store_result
from gspdml.workflows.reproduce.spec_run import plan_spec
from tests.data.test_data_flowers102 import make_flowers
from tests.helpers.datasets import write_image
from tests.workflows.test_reproduce_simpool import CROP, _authors_vit


def _reproduce(table, data, output, *settings, rows):
    argv = ["reproduce", table, *settings, "--data-root", str(data), "--output-dir", str(output)]
    assert main([*argv, "--rows", *rows]) == 0
    return json.loads((output / "tables" / f"{table}.json").read_text())


def _slow_top1(model, paths, labels, size):
    transform = classification_transforms(size, size)[1]
    correct = 0
    with torch.no_grad():
        for path, label in zip(paths, labels):
            logits = model(transform(load_image(path), None)[None])[0].tolist()
            best = max(range(len(logits)), key=lambda c: (logits[c], -c))
            correct += best == int(label)
    return correct / len(paths)


def _trained(model, entry):
    (result,) = entry["runs"].values()
    state, _ = load_state(result.removesuffix(".json") + "/" + CHECKPOINT)
    model.load_state_dict(state["model"])
    return model.eval()


@pytest.mark.slow
def test_table_3_12_trains_a_resnet18_with_the_rows_simpool_on_the_first_fifth(tmp_path):
    data = tmp_path / "data"
    for c in range(3):
        for i in range(10):
            write_image(
                data / "imagenet" / "train" / f"n0{c}" / f"{i:02d}.JPEG", seed=i, fmt="JPEG"
            )
        for i in range(3):
            write_image(
                data / "imagenet" / "val" / f"n0{c}" / f"v{i}.JPEG", seed=50 + i, fmt="JPEG"
            )
    settings = ["epochs=1", "batch_size=3", "resize=32", "crop=32"]
    row = "imagenet-20%/linear-LN-row1"
    payload = _reproduce("simpool-table3.12", data, tmp_path / "out", *settings, rows=[row])
    entry = next(e for e in payload["rows"] if e["key"] == row)
    assert entry["status"] == "trained"
    assert entry["cells"]["Acc"]["paper"] == 57.0  # Psomas thesis Table 3.12, right, row 1
    torch.manual_seed(0)
    backbone = build_backbone({"name": "resnet18"}, 3)
    pooling = build_pooling(
        {"name": "simpool", "gamma": None, "linear": ["q", "k", "v"], "layernorm": ["q", "k", "v"]},
        in_channels=512,
    )
    model = _trained(Classifier(backbone, pooling, 512, 3), entry)
    assert model.pooling.wv is not None and model.pooling.norm_q is not None  # the row's layers
    val = read_class_folders(data / "imagenet", "val")
    expected = _slow_top1(model, val.paths, val.labels, 32)
    assert entry["cells"]["Acc"]["ours"] == pytest.approx(100 * expected)
    others = [e for e in payload["rows"] if e["key"] != row]
    assert {e["status"] for e in others} <= {"not selected"}
    # what it trained on: the first 20% of 10 images per class, by file name
    train = read_class_folders(data / "imagenet", "train", 0.2)
    assert [p.name for p in train.paths] == ["00.JPEG", "01.JPEG"] * 3


@pytest.mark.slow
def test_table_3_4_fine_tunes_the_released_dino_simpool_vit_on_flowers(tmp_path):
    data = tmp_path / "data"
    labels = [1, 2, 3] * 4
    make_flowers(data / "flowers102", labels, [1, 2, 3, 4, 5, 6], [7, 8, 9], [10, 11, 12])
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    file = checkpoints / "vits_dino_simpool_ep100.pth"
    torch.save(_authors_vit("dino", "simpool", seed=1)[0], file)
    settings = [f"checkpoints={checkpoints}", "epochs=1", "batch_size=3", f"resize={CROP}"]
    row = "flowers102/DINO/SimPool"
    payload = _reproduce(
        "simpool-table3.4", data, tmp_path / "out", *settings, f"crop={CROP}", rows=[row]
    )
    entry = next(e for e in payload["rows"] if e["key"] == row)
    assert entry["cells"]["DINO Flowers"]["paper"] == 98.4  # Psomas thesis Table 3.4
    embedder = released_embedder(file, "simpool", backbone="vit", gamma=1.25, pooled_norm=True)
    model = Classifier(embedder.backbone, embedder.pooling, 64, 3, embedder.pooled_norm)
    model = _trained(model, entry)
    paths, test_labels = read_flowers102(data / "flowers102").part("test")
    expected = _slow_top1(model, paths, test_labels, CROP)
    assert entry["cells"]["DINO Flowers"]["ours"] == pytest.approx(100 * expected)
    assert get_table("simpool-table3.4").protocol == "classify"


def test_a_row_that_ran_has_the_status_of_a_trained_row(tmp_path):
    """A classify row trains its classifier (Psomas thesis Table 3.12: a ResNet-18 per row), so
    once it ran its status is "trained", as a training table's row, not "evaluated", the status
    of a frozen model's evaluation; its stored top-1 is reused, nothing trains here."""
    table, row = "simpool-table3.12", "imagenet-20%/linear-LN-row1"
    data, output = tmp_path / "data", tmp_path / "out"
    where = {"data_root": str(data), "output_dir": str(output)}
    _, (plan,) = plan_spec(CLASSIFY, get_table(table), rows=[row], **where)
    (run,) = plan.evaluations
    store_result(run.output, run.settings(), {"top1": 0.25})
    payload = _reproduce(table, data, output, rows=[row])
    entry = next(e for e in payload["rows"] if e["key"] == row)
    assert entry["status"] == "trained" and entry["verdict"].startswith("below")  # 25 vs 57.0
    assert entry["cells"]["Acc"]["ours"] == 25.0
    assert entry["runs"] == {entry["dataset"]: str(run.output)}
    written = (output / "tables" / f"{table}.md").read_text(encoding="utf-8")
    (line,) = [line for line in written.splitlines() if "| 25.00 |" in line]
    assert "| trained |" in line


def test_a_fine_tuning_row_without_its_checkpoint_says_where_to_get_it(tmp_path, capsys):
    argv = ["reproduce", "simpool-table3.4", "--data-root", str(tmp_path), "--rows", "cifar10/*"]
    assert main([*argv, "--output-dir", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert "fine-tunes the released vits_supervised_official_ep100.pth.tar" in err
    assert "https://huggingface.co/billpsomas/vits_supervised_official_ep100" in err


def test_every_runnable_ablation_row_builds_its_pooling_and_the_rest_say_why():
    """Psomas thesis Table 3.12: each runnable row's SimPool variant is a valid setting of the
    registered pooling (a ResNet-18 map in, one 512-D vector out); the k (max) rows maximise
    the logits of k vectors; the right-hand rows whose layers the text lost are listed with that reason."""
    from gspdml.workflows.reproduce.simpool_thesis import LOST_SETTING

    table = get_table("simpool-table3.12")
    maps = torch.randn(2, 512, 3, 3)
    for row in table.runnable:
        pooling = build_pooling(row.classify.pooling_spec(), in_channels=512)
        assert pooling(maps).vector.shape == (2, 512), row.key
        assert row.classify.fraction == 0.2 and row.classify.network == "resnet18"
    assert [row.missing for row in table.rows if row.missing] == [LOST_SETTING] * 12
    assert len(table.runnable) == 19
    assert [r.label for r in table.runnable if r.classify.max_logits] == ["k(max)=2", "k(max)=5"]
    fine = get_table("simpool-table3.4")
    assert {(r.label, r.dataset) for r in fine.runnable} == {
        (f"{s}/{m}", d)
        for s in ("Supervised", "DINO")
        for m in ("Baseline", "SimPool")
        for d in ("cifar10", "cifar100", "flowers102")
    }
