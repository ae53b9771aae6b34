"""``gspdml reproduce simpool-table3.9`` (Psomas thesis Table 3.9, protocol ``frozen``) end to end
through the CLI, on tiny CUB / Cars196 / SOP / In-Shop trees in their official layouts, with
checkpoints written in the layout of the SimPool authors' DINO release (``{"teacher", "student",
"args"}``, keys ``backbone.*``, ``head.*``, ``simpool.norm_patches`` / ``wq`` / ``wk``) around a
randomly initialised ResNet-50.

Cross-checks: the written R@K equal a slow loop over rankings (tests/helpers/knn_reference.py)
of embeddings computed here with the loaded model; a second call evaluates
nothing; the loader maps every key of the authors' layouts, and its SimPool equals the authors'
algorithm written out here; a pickle that would run code is refused.
"""

import argparse
import functools
import json
import math

import pytest
import torch

from gspdml.cli import main
from gspdml.data import DATASETS as READERS
from gspdml.errors import DataError
from gspdml.models import simpool_release
from gspdml.models.backbones import build_backbone
from gspdml.models.simpool_release import released_embedder, released_state_dict
from gspdml.workflows.reproduce import get_table
from tests.helpers.datasets import make_cars, make_cub, make_inshop, make_sop, write_image
from tests.helpers.knn_reference import slow_query_scores

TABLE = "simpool-table3.9"
SIZES = ["resize=56", "crop=48"]  # a 2 x 2 layer4 map: SimPool attends over 4 locations
BASELINE, SIMPOOL = "resnet50_dino_official_ep100.pth", "resnet50_dino_simpool_ep100.pth"
#: the reader and folder of each dataset of the table
FOLDERS = {
    "cub": ("cub200", "CUB_200_2011"),
    "cars": ("cars196", "cars196"),
    "sop": ("sop", "Stanford_Online_Products"),
    "inshop": ("inshop", "InShop"),
}


@functools.cache
def _random_resnet() -> dict:
    """A randomly initialised ResNet-50's state dict (built once: He init is slow on a CPU)."""
    return dict(build_backbone({"name": "resnet50"}, 3).state_dict())


def _authors_resnet(simpool: bool, beta: bool = False, seed: int = 0) -> dict:
    """A ResNet-50 state dict under the authors' names: torchvision's layout, plus SimPool's
    ``simpool.*`` (LayerNorm affine and the d x d maps, random) when ``simpool``."""
    torch.manual_seed(seed)
    state = {key: value.clone() for key, value in _random_resnet().items()}
    for key, value in state.items():  # BN statistics away from 0 / 1, as a trained model's
        if key.endswith("running_var"):
            state[key] = value.uniform_(0.5, 2.0)
        elif key.endswith("running_mean"):
            state[key] = value.normal_(0, 0.1)
    if simpool:
        d = 2048
        state["simpool.norm_patches.weight"] = 1 + 0.1 * torch.randn(d)
        state["simpool.norm_patches.bias"] = 0.1 * torch.randn(d)
        state["simpool.wq.weight"] = torch.randn(d, d) / d**0.5
        state["simpool.wk.weight"] = torch.randn(d, d) / d**0.5
        if beta:
            state["simpool.beta"] = torch.tensor([0.25])
    return state


def _dino_checkpoint(state: dict) -> dict:
    """The layout of the DINO release: teacher and student (behind ``module.``) multi-crop
    wrappers, each ``backbone.*`` and the projection head ``head.*``; the run's args."""
    head = {"head.mlp.0.weight": torch.randn(8, 2048), "head.last_layer.weight_g": torch.ones(8, 1)}
    teacher = {**{f"backbone.{k}": v for k, v in state.items()}, **head}
    student = {f"module.{k}": v + 1 for k, v in teacher.items()}  # must not be read
    return {"teacher": teacher, "student": student, "args": argparse.Namespace(arch="resnet50")}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The data root with the four datasets and a folder of the two released DINO ResNet-50
    files (random weights, the authors' layout)."""
    root = tmp_path_factory.mktemp("simpool")
    data = root / "data"
    make_cub(data, write_image, classes=4, per_class=3)
    make_cars(data / "cars196", write_image, classes=4, per_class=3)
    make_sop(data, write_image, train_classes=2, test_classes=4, per_class=2)
    make_inshop(data / "InShop", write_image, train_items=2, test_items=3, per_item=3)
    checkpoints = root / "checkpoints"
    checkpoints.mkdir()
    torch.save(_dino_checkpoint(_authors_resnet(False, seed=1)), checkpoints / BASELINE)
    torch.save(_dino_checkpoint(_authors_resnet(True, seed=2)), checkpoints / SIMPOOL)
    return data, checkpoints


def _reproduce(data, output, *settings, rows=()):
    argv = ["reproduce", TABLE, *settings, "--data-root", str(data), "--output-dir", str(output)]
    assert main(argv + (["--rows", *rows] if rows else [])) == 0
    return json.loads((output / "tables" / f"{TABLE}.json").read_text())


def _slow_recalls(model, dataset, ks):
    """R@K (fractions) of the test split of ``dataset``: its images embedded here in one batch
    (eval mode: no image depends on another), ranked by a slow loop (leave-one-out, or
    In-Shop's query -> gallery)."""
    reader, folder = FOLDERS[dataset]
    spec = {"name": reader, "root": str(folder), "transform": "center", "resize": 56, "crop": 48}
    split = READERS.build({**spec, "val_fraction": 0.0}, "data", seed=0).test

    def embed(items):
        images = torch.stack([items[i][0] for i in range(len(items))])
        with torch.no_grad():
            return model(images).embedding, [int(items[i][1]) for i in range(len(items))]

    query, labels = embed(split.query)
    gallery, gallery_labels = (None, None) if split.gallery is None else embed(split.gallery)
    scores = [
        slow_query_scores(query, labels, i, ks, gallery, gallery_labels) for i in range(len(labels))
    ]
    scores = [s for s in scores if s is not None]
    return {k: sum(s[f"recall_at_{k}"] for s in scores) / len(scores) for k in ks}


def test_table_3_9_equals_a_slow_knn_of_the_released_models_and_is_reused(
    release, tmp_path, monkeypatch
):
    data, checkpoints = release
    table = get_table(TABLE)
    payload = _reproduce(data, tmp_path / "out", f"checkpoints={checkpoints}", *SIZES)
    entries = {entry["key"]: entry for entry in payload["rows"]}
    assert set(entries) == {row.key for row in table.rows}
    runnable = [row for row in table.rows if row.frozen is not None]
    assert {row.label for row in runnable} == {"DINO/ResNet-50/Baseline", "DINO/ResNet-50/SimPool"}
    assert len(runnable) == 8  # two models on four datasets
    monkeypatch.chdir(data)  # the readers' roots below are the folder names
    models = {
        "gap": released_embedder(checkpoints / BASELINE, "gap"),
        "simpool": released_embedder(checkpoints / SIMPOOL, "simpool", gamma=2.0),
    }
    for row in runnable:
        entry = entries[row.key]
        assert entry["status"] == "reproduced" and entry["frozen"] == row.frozen.describe()
        model = models[row.frozen.pooling]
        ks = [int(title[2:]) for title in row.paper]
        expected = _slow_recalls(model, row.dataset, ks)
        for title, cell in entry["cells"].items():
            if title not in row.paper:
                assert cell["ours"] is None
                continue
            assert cell["ours"] == pytest.approx(100 * expected[int(title[2:])], abs=1e-9)
            assert cell["paper"] == row.paper[title].value
            assert cell["diff"] == pytest.approx(cell["ours"] - cell["paper"])
    for row in table.rows:
        if row.frozen is None:
            assert entries[row.key]["status"] == f"missing: {row.missing}"
    # the printed numbers, transcribed a second time: DINO ResNet-50 SimPool on CUB, In-Shop R@20
    assert entries["cub/DINO/ResNet-50/SimPool"]["cells"]["R@1"]["paper"] == 30.7
    assert entries["inshop/DINO/ResNet-50/Baseline"]["cells"]["R@20"]["paper"] == 64.1

    def refuse(*args, **kwargs):
        raise AssertionError("a stored evaluation was run again")

    monkeypatch.setattr(simpool_release, "released_embedder", refuse)
    again = _reproduce(data, tmp_path / "out", f"checkpoints={checkpoints}", *SIZES)
    assert again["rows"] == payload["rows"]


def test_one_checkpoint_for_the_selected_rows_and_clear_errors(release, tmp_path, capsys):
    data, checkpoints = release
    out = tmp_path / "out"
    settings = [f"checkpoint={checkpoints / SIMPOOL}", *SIZES]
    payload = _reproduce(data, out, *settings, rows=["cub/DINO/ResNet-50/SimPool"])
    statuses = {entry["key"]: entry["status"] for entry in payload["rows"]}
    assert statuses["cub/DINO/ResNet-50/SimPool"] == "reproduced"
    assert statuses["cars/DINO/ResNet-50/SimPool"] == "not selected"
    capsys.readouterr()

    def error(*settings, rows=()):
        argv = ["reproduce", TABLE, *settings, "--data-root", str(data), "--output-dir", str(out)]
        assert main(argv + (["--rows", *rows] if rows else [])) != 0
        return capsys.readouterr().err

    # the baseline's file has no SimPool: the error names the file and the missing keys
    text = error(f"checkpoint={checkpoints / BASELINE}", rows=["sop/DINO/*/SimPool"])
    assert "resnet50_dino_official_ep100.pth: weights do not fit" in text
    assert "missing 4 keys (e.g. pooling.norm.weight" in text
    # no file given: the error names the released file and where it is published
    text = error(rows=["cub/DINO/*"])
    assert "evaluates the released resnet50_dino_official_ep100.pth: download it from" in text
    assert "expected a positive integer" in error("batch_size=0")
    assert "a frozen table takes key=value settings" in error("model.pooling=gap")
    assert main(["reproduce", TABLE, "--dry-run", "--data-root", str(data)]) == 0
    text = capsys.readouterr().out
    assert "8 runnable" in text and "needs checkpoints=DIR or checkpoint=PATH" in text
    assert "huggingface.co/billpsomas/resnet50_dino_simpool_ep100" in text


# ------------------------------------------------------------------------------ the loader
@pytest.mark.parametrize("layout", ["dino", "timm"])
def test_the_loader_maps_every_key_of_the_authors_layouts(tmp_path, layout):
    """DINO: teacher of ``{"teacher", "student", "args"}``, ``backbone.`` prefixes, the head
    dropped; timm (the supervised release): ``{"state_dict", "args"}``, bare keys, the
    classifier ``fc`` dropped, SimPool with ``beta``."""
    state = _authors_resnet(True, beta=layout == "timm")
    if layout == "dino":
        checkpoint = _dino_checkpoint(state)
    else:
        classifier = {"fc.weight": torch.randn(1000, 2048), "fc.bias": torch.zeros(1000)}
        checkpoint = {"state_dict": {**state, **classifier}, "args": argparse.Namespace(lr=0.4)}
    torch.save(checkpoint, tmp_path / "model.pth")
    renamed = released_state_dict(tmp_path / "model.pth")
    names = {"simpool.norm_patches.": "pooling.norm.", "simpool.wq.": "pooling.wq."}
    names.update({"simpool.wk.": "pooling.wk.", "simpool.beta": "pooling.beta"})
    expected = {}
    for key, value in state.items():
        new = next((n + key[len(o) :] for o, n in names.items() if key.startswith(o)), None)
        expected[new or f"backbone.{key}"] = value
    assert set(renamed) == set(expected)
    for key, value in expected.items():
        assert torch.equal(renamed[key].reshape(value.shape), value), key
    model = released_embedder(tmp_path / "model.pth", "simpool")
    loaded = model.state_dict()
    assert set(loaded) == set(expected)
    assert all(torch.equal(loaded[k].reshape(v.shape), v) for k, v in expected.items())
    assert (model.pooling.beta is not None) == (layout == "timm")


def test_the_loaded_simpool_is_the_authors_algorithm(tmp_path):
    """SimPool of the release, written out (per-image minimum, as Eq. 3.66): the query is the
    GAP of the raw map through ``wq``, keys ``wk LN(X)``, attention softmax(k.q / sqrt(d)),
    values ``LN(X) - min + eps`` pooled by the power mean of order gamma, plus beta."""
    state = _authors_resnet(True, beta=True)
    torch.save({"state_dict": state}, tmp_path / "model.pth")
    model = released_embedder(tmp_path / "model.pth", "simpool", gamma=2.0)
    maps = torch.randn(3, 2048, 2, 3).relu()
    pooled = model.pooling(maps).vector
    for b in range(3):
        x = maps[b].flatten(1).T.double()  # [p, d]
        mean, var = x.mean(1, keepdim=True), x.var(1, unbiased=False, keepdim=True)
        normed = (x - mean) / torch.sqrt(var + 1e-6) * state["simpool.norm_patches.weight"].double()
        normed = normed + state["simpool.norm_patches.bias"].double()
        q = state["simpool.wq.weight"].double() @ x.mean(0)
        k = normed @ state["simpool.wk.weight"].double().T
        a = torch.softmax(k @ q / math.sqrt(2048), dim=0)
        v = normed - normed.min() + 1e-6
        expected = (a @ v**2) ** 0.5 + 0.25
        assert torch.allclose(pooled[b].double(), expected, rtol=1e-4, atol=1e-5)


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (marker.write_text, ("code ran",))

    torch.save(
        {"teacher": {"backbone.conv1.weight": torch.zeros(1)}, "x": Payload()},
        tmp_path / "evil.pth",
    )
    with pytest.raises(DataError, match=r"evil.pth: cannot read weights"):
        released_embedder(tmp_path / "evil.pth", "gap")
    assert not marker.exists()
