"""``gspdml reproduce simpool-table3.9`` (Psomas thesis Table 3.9, protocol ``frozen``) end to end
through the CLI, on tiny CUB / Cars196 / SOP / In-Shop trees in their official layouts, with
checkpoints written in the layout of the SimPool authors' DINO release (``{"teacher", "student",
"args"}``, keys ``backbone.*``, ``head.*``, ``simpool.norm_patches`` / ``wq`` / ``wk``) around a
randomly initialised ResNet-50, and in the layouts of the ViT-S releases (DINO and the
supervised timm fork, ``gp.pool.*``) around a tiny random ViT (width 64, 2 blocks, 3 x 3
patches of 16 on the 48-pixel crops).

Cross-checks: the written R@K equal a slow loop over rankings (tests/helpers/knn_reference.py)
of embeddings computed here with the loaded model; a second call evaluates
nothing; the loader maps every key of the authors' layouts, and its SimPool equals the authors'
algorithm written out here in float64; the ViT baseline is timm's own ViT's [CLS] token with
the same weights; a pickle that would run code is refused.
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
from gspdml.models.backbones.timm_backbone import import_timm
from gspdml.models.simpool_release import released_embedder, released_state_dict
from gspdml.workflows.reproduce import get_table
from tests.helpers.datasets import make_cars, make_cub, make_inshop, make_sop, write_image
from tests.helpers.knn_reference import slow_query_scores

TABLE = "simpool-table3.9"
BASE_SIMPOOL = ("Baseline", "SimPool")
SIZES = ["resize=56", "crop=48"]  # a 2 x 2 layer4 map: SimPool attends over 4 locations
BASELINE, SIMPOOL = "resnet50_dino_official_ep100.pth", "resnet50_dino_simpool_ep100.pth"
#: the released ViT-S files: name -> (layout, method)
VITS = {
    "vits_dino_official_ep100.pth": ("dino", "cls"),
    "vits_dino_simpool_ep100.pth": ("dino", "simpool"),
    "vits_supervised_official_ep100.pth.tar": ("timm", "cls"),
    "vits_gem1.25_supervised_beta.pth.tar": ("timm", "simpool"),
}
WIDTH, CROP = 64, 48
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
    wrappers, each ``backbone.*`` and the projection head ``head.*``; the run's args. The
    student has every key of the teacher, each holding one number (a loader that read it fails
    on every shape; a full copy would double the file)."""
    width = next(
        v.shape[0] for k, v in state.items() if k.endswith(("conv1.weight", "proj.weight"))
    )
    head = {
        "head.mlp.0.weight": torch.randn(8, width),
        "head.last_layer.weight_g": torch.ones(8, 1),
    }
    teacher = {**{f"backbone.{k}": v for k, v in state.items()}, **head}
    student = {f"module.{k}": v.new_ones(1) for k, v in teacher.items()}  # must not be read
    return {"teacher": teacher, "student": student, "args": argparse.Namespace(arch="resnet50")}


def _timm_vit(class_token: bool, seed: int = 0):
    """A tiny timm ViT (the reference architecture) with random weights, LayerNorms away from
    the identity, in eval mode."""
    timm = import_timm()
    torch.manual_seed(seed)
    vit = timm.models.vision_transformer.VisionTransformer(
        img_size=CROP,
        patch_size=16,
        embed_dim=WIDTH,
        depth=2,
        num_heads=1,
        num_classes=0,
        class_token=class_token,
        global_pool="token" if class_token else "",
    )
    for name, param in vit.named_parameters():
        if "norm" in name:
            param.data = (1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(param)
        elif name in ("pos_embed", "cls_token"):
            param.data = torch.randn_like(param)
    return vit.eval()


def _authors_vit(layout: str, method: str, seed: int = 0) -> tuple[dict, dict]:
    """A released ViT file's content in the authors' layout (``dino``: the teacher of DINO's
    wrapper; ``timm``: ``{"state_dict", "state_dict_ema", "args"}`` with the classifier
    ``head``) and the weights it holds: the tiny ViT's, with SimPool's (``simpool.*`` in the DINO
    fork, ``gp.pool.*`` in the timm fork, ``beta`` in both) when ``method`` is SimPool."""
    state = dict(_timm_vit(method == "cls", seed).state_dict())
    if method == "simpool":
        d, prefix = WIDTH, "simpool." if layout == "dino" else "gp.pool."
        state[prefix + "norm_patches.weight"] = 1 + 0.1 * torch.randn(d)
        state[prefix + "norm_patches.bias"] = 0.1 * torch.randn(d)
        state[prefix + "wq.weight"] = torch.randn(d, d) / d**0.5
        state[prefix + "wk.weight"] = torch.randn(d, d) / d**0.5
        state[prefix + "beta"] = torch.tensor([0.25])
    if layout == "dino":
        return _dino_checkpoint(state), state
    classifier = {"head.weight": torch.randn(10, WIDTH), "head.bias": torch.zeros(10)}
    ema = {k: v + 1 for k, v in state.items()}  # must not be read
    wrapped = {"state_dict": {**state, **classifier}, "state_dict_ema": ema}
    return {**wrapped, "args": argparse.Namespace(model="vit_small_patch16_224")}, state


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
    for seed, (name, (layout, method)) in enumerate(VITS.items()):
        torch.save(_authors_vit(layout, method, seed=3 + seed)[0], checkpoints / name)
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
        with torch.no_grad():  # lists: the slow loop reads them element by element
            return model(images).embedding.tolist(), [int(items[i][1]) for i in range(len(items))]

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
    networks = {"ResNet-50": ("DINO",), "ViT-S": ("DINO", "Supervised")}
    labels = {f"{s}/{n}/{m}" for n, sup in networks.items() for s in sup for m in BASE_SIMPOOL}
    assert {row.label for row in runnable} == labels
    assert len(runnable) == 24  # six models on four datasets
    # the ViT-S models as released: SimPool with gamma 1.25; only DINO's normalises after it
    vits = {row.label: row.frozen for row in runnable if row.label.endswith("ViT-S/SimPool")}
    assert {label: (s.gamma, s.pooled_norm) for label, s in vits.items()} == {
        "DINO/ViT-S/SimPool": (1.25, True),
        "Supervised/ViT-S/SimPool": (1.25, False),
    }
    monkeypatch.chdir(data)  # the readers' roots below are the folder names
    models = {}
    for row in runnable:
        spec = row.frozen
        if spec not in models:
            models[spec] = released_embedder(
                checkpoints / spec.checkpoint,
                spec.pooling,
                backbone=spec.backbone,
                gamma=spec.gamma,
                pooled_norm=spec.pooled_norm,
            )
        entry = entries[row.key]
        assert entry["status"] == "evaluated" and entry["frozen"] == spec.describe()
        model = models[spec]
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
    assert statuses["cub/DINO/ResNet-50/SimPool"] == "evaluated"
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
    # ViT-S: a SimPool file for the [CLS] baseline, a baseline file for SimPool, a ResNet file
    text = error(
        f"checkpoint={checkpoints / 'vits_dino_simpool_ep100.pth'}", rows=["cub/DINO/ViT-S/B*"]
    )
    assert "vits_dino_simpool_ep100.pth: this ViT has no [CLS] token (a SimPool model)" in text
    text = error(
        f"checkpoint={checkpoints / 'vits_dino_official_ep100.pth'}", rows=["cub/DINO/ViT-S/S*"]
    )
    assert "weights do not fit" in text and "missing 4 keys (e.g. pooling.norm.weight" in text
    text = error(f"checkpoint={checkpoints / BASELINE}", rows=["cub/Supervised/ViT-S/Baseline"])
    assert "resnet50_dino_official_ep100.pth: not a ViT checkpoint of the SimPool release" in text
    # no file given: the error names the released file and where it is published
    text = error(rows=["cub/DINO/*"])
    assert "evaluates the released resnet50_dino_official_ep100.pth: download it from" in text
    assert "expected a positive integer" in error("batch_size=0")
    assert "a frozen table takes key=value settings" in error("model.pooling=gap")
    assert main(["reproduce", TABLE, "--dry-run", "--data-root", str(data)]) == 0
    text = capsys.readouterr().out
    assert "24 runnable" in text and "needs checkpoints=DIR or checkpoint=PATH" in text
    assert "huggingface.co/billpsomas/resnet50_dino_simpool_ep100" in text
    # the paper's numbers of each selected row (Psomas thesis Table 3.9, DINO ResNet-50 SimPool)
    assert "| cub/DINO/ResNet-50/SimPool | 30.70 | 40.90 | 53.30 | – | – | – |" in text


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


def _authors_simpool(x: torch.Tensor, state: dict, prefix: str, gamma: float) -> torch.Tensor:
    """The released SimPool layer on one image's features ``x`` ``[p, d]``, written out in
    float64 with the per-image minimum (Eq. 3.66): the query is the GAP of the raw features
    through ``wq``, keys ``wk LN(X)``, attention softmax(k.q / sqrt(d)), values
    ``LN(X) - min + eps`` pooled by the power mean of order gamma, plus beta."""
    x = x.double()
    w = {
        key[len(prefix) :]: value.double() for key, value in state.items() if key.startswith(prefix)
    }
    mean, var = x.mean(1, keepdim=True), x.var(1, unbiased=False, keepdim=True)
    normed = (x - mean) / torch.sqrt(var + 1e-6) * w["norm_patches.weight"] + w["norm_patches.bias"]
    q = w["wq.weight"] @ x.mean(0)
    k = normed @ w["wk.weight"].T
    a = torch.softmax(k @ q / math.sqrt(x.shape[1]), dim=0)
    v = normed - normed.min() + 1e-6
    return (a @ v**gamma) ** (1 / gamma) + w.get("beta", torch.zeros(1)).double()


def test_the_loaded_simpool_is_the_authors_algorithm(tmp_path):
    state = _authors_resnet(True, beta=True)
    torch.save({"state_dict": state}, tmp_path / "model.pth")
    model = released_embedder(tmp_path / "model.pth", "simpool", gamma=2.0)
    maps = torch.randn(3, 2048, 2, 3).relu()
    pooled = model.pooling(maps).vector
    for b in range(3):
        expected = _authors_simpool(maps[b].flatten(1).T, state, "simpool.", 2.0)
        assert torch.allclose(pooled[b].double(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(VITS))
def test_the_released_vits_load_every_key_and_embed_as_the_authors_models(tmp_path, name):
    """Every key of the four ViT-S layouts lands in the embedder; the embedding is, per image,
    the Baseline: timm's own ViT's [CLS] token after its final LayerNorm (``forward_features``,
    same weights); SimPool on the DINO ViT: the authors' layer (float64, written out) on the
    last block's tokens, then the final LayerNorm; on the supervised ViT: the layer on the
    normalised tokens. All L2-normalised."""
    layout, method = VITS[name]
    checkpoint, state = _authors_vit(layout, method)
    torch.save(checkpoint, tmp_path / name)
    pooled_norm = layout == "dino" and method == "simpool"
    model = released_embedder(
        tmp_path / name, method, backbone="vit", gamma=1.25, pooled_norm=pooled_norm
    )
    loaded = model.state_dict()
    prefix = "simpool." if layout == "dino" else "gp.pool."
    for key, value in state.items():
        if key.startswith(prefix):
            ours = "pooling." + key[len(prefix) :].replace("norm_patches.", "norm.")
        elif pooled_norm and key.startswith("norm."):
            ours = "pooled_norm." + key[len("norm.") :]
        else:
            ours = f"backbone.{key}"
        assert torch.equal(loaded.pop(ours).reshape(value.shape), value), key
    assert not loaded  # nothing left at its initial value
    reference = _timm_vit(method == "cls")
    reference.load_state_dict({k: v for k, v in state.items() if not k.startswith(prefix)})
    images = torch.randn(3, 3, CROP, CROP)
    with torch.no_grad():
        embedding = model(images).embedding
        if pooled_norm:  # the last block's tokens: timm's forward without its final norm
            final, reference.norm = reference.norm, torch.nn.Identity()
            tokens = reference.forward_features(images)
        else:
            tokens = reference.forward_features(images)
    for b in range(3):
        if method == "cls":
            expected = tokens[b, 0].double()
        else:
            expected = _authors_simpool(tokens[b], state, prefix, 1.25)
            if pooled_norm:
                expected = torch.nn.functional.layer_norm(
                    expected, (WIDTH,), final.weight.double(), final.bias.double(), 1e-6
                )
        expected = expected / expected.norm()
        assert torch.allclose(embedding[b].double(), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"trained on 48 x 48 images .* set the crop to 48"):
        model(torch.randn(1, 3, 64, 64))


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


def test_a_replaced_checkpoint_or_an_invalid_stored_result_is_evaluated_again(
    release, tmp_path, monkeypatch, capsys
):
    """A checkpoint replaced by another of the same size reused the old R@K (the key was path
    and size, issue 39 #5); a stored result with a recall of 7.5 was printed as 750.00, a
    malformed one raised a raw KeyError (#6). Stored results are keyed by the file's content
    hash and checked when read."""
    data, _ = release
    file, row = tmp_path / "model.pth", ["cub/DINO/ViT-S/SimPool"]
    torch.save(_authors_vit("dino", "simpool", seed=8)[0], file)
    built = []
    loader = simpool_release.released_embedder

    def counted(*args, **kwargs):
        built.append(args[0])
        return loader(*args, **kwargs)

    monkeypatch.setattr(simpool_release, "released_embedder", counted)
    monkeypatch.chdir(data)  # the readers' roots of _slow_recalls are the folder names

    def ours():
        payload = _reproduce(data, tmp_path / "out", f"checkpoint={file}", *SIZES, rows=row)
        (entry,) = [e for e in payload["rows"] if e["key"] == row[0]]
        return {int(t[2:]): c["ours"] for t, c in entry["cells"].items() if c["ours"] is not None}

    def expected():
        spec = next(r.frozen for r in get_table(TABLE).rows if r.key == row[0])
        model = loader(
            file,
            spec.pooling,
            backbone=spec.backbone,
            gamma=spec.gamma,
            pooled_norm=spec.pooled_norm,
        )
        recalls = _slow_recalls(model, "cub", [1, 2, 4])  # the row's columns (R@1, R@2, R@4)
        return {k: pytest.approx(100 * v, abs=1e-9) for k, v in recalls.items()}

    first = ours()
    assert first == expected() and len(built) == 1
    assert ours() == first and len(built) == 1  # stored: nothing evaluated
    size = file.stat().st_size
    torch.save(_authors_vit("dino", "simpool", seed=9)[0], file)  # another model
    assert file.stat().st_size == size
    assert ours() == expected() and len(built) == 2

    stored = max(
        (tmp_path / "out" / "frozen" / "cub").glob("*.json"), key=lambda p: p.stat().st_mtime_ns
    )
    record = json.loads(stored.read_text())
    capsys.readouterr()
    for result, fault in [
        ({**record["result"], "recall_at_1": 7.5}, "'recall_at_1' is 7.5, outside [0, 1]"),
        ({"recall_at_1": 0.5}, "fields ['recall_at_1'], expected"),
        ({**record["result"], "recall_at_2": "0.5"}, "'recall_at_2' is '0.5', not a number"),
        ([0.5], "'result' is not an object"),
    ]:
        stored.write_text(json.dumps({**record, "result": result}))
        assert ours() == expected()
        err = capsys.readouterr().err
        assert f"gspdml: {stored}: the stored result is invalid ({fault}" in err
        assert "it is evaluated again" in err
    stored.write_text("{not json")
    assert ours() == expected()
    assert f"gspdml: {stored}: not a readable JSON file" in capsys.readouterr().err
    assert len(built) == 7
