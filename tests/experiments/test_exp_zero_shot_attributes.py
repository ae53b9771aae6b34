"""experiments/zero_shot_attributes: the smoke run (every model, class histograms, the shortened
1000-split protocol), the data split against the pre-training recipe's glyphs, and the published
table and verdict logic."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def module():
    spec = importlib.util.spec_from_file_location(
        "exp_zero_shot", ROOT / "experiments" / "zero_shot_attributes" / "run.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smoke(module, tmp_path_factory):
    """The smoke run of every default model (seed 0), trained once for the tests that read it:
    its folder and its results, which the readers leave as they are."""
    out = tmp_path_factory.mktemp("zero_shot_smoke")
    return out, module.main(["--smoke", "--out", str(out)])


def test_zero_shot_attributes_smoke(module, smoke):
    out, results = smoke
    assert (out / "results.json").is_file() and (
        out / "class_histograms_frozen.png"
    ).stat().st_size > 5_000
    assert set(results["summary"]) == set(module.WEIGHTS)
    for weights in module.WEIGHTS:
        assert set(results["summary"][weights]) == set(module.DEFAULT_MODELS)
        for model, hist in results["class_histograms_seed0"][weights].items():
            hist = np.array(hist)
            assert hist.shape == (10, module.PROTOTYPES)
            np.testing.assert_allclose(hist.sum(1), 1.0, atol=1e-3)  # mean of per-image histograms
            row = results["per_seed"][weights][model][0]
            assert (
                0.0 <= row["l2"] <= 1.0
                and 0.0 <= row["cosine"] <= 1.0
                and 0.0 <= row["map_c"] <= 1.0
            )
            assert 0.0 <= row["entropy"] <= math.log(module.PROTOTYPES) + 1e-6
            assert row["steps"] == results["plan"]["steps"]
    for model in module.DEFAULT_MODELS:  # selected: a validation round's step; last: the last step
        selected, last = (results["per_seed"][w][model][0] for w in module.WEIGHTS)
        assert selected["best_step"] in (2, 4) and last["best_step"] == 4
    rows_per_table = 2 + len(module.DEFAULT_MODELS)  # header, rule, one row per model
    assert (
        results["table"].count("\n")
        == len(module.WEIGHTS) * rows_per_table + 3 * (len(module.WEIGHTS) - 1) + 3
    )
    assert results["table"].endswith(
        module.init_loss_note()
    )  # the reason's numbers travel with the table


def test_split_keeps_val_and_test_images_away_from_pretraining(module):
    """No val/test image was a glyph of the pre-training tiles (recipe resnet20-fashion)."""
    from gspdml.data.shared_collage import tile_classification_arrays
    from gspdml.training.pretrain import load_recipe

    images, labels = module._fashion_mnist()
    data = load_recipe("resnet20-fashion")["data"]
    tiles = tile_classification_arrays(
        images,
        labels,
        split_seed=data["split_seed"],
        tile_size=data["tile_size"],
        tiles_per_class=data["tiles_per_class"],
        glyph_split=data["glyph_split"],
        seed=0,
    )
    seen = set(tiles["glyphs"].ravel().tolist())
    train, val, test = module.split_indices(labels, seed=3, images_per_class=500)
    assert [len(p) for p in (train, val, test)] == [3500, 500, 1000]
    assert not seen & set(val.tolist()) and not seen & set(test.tolist())
    assert len(set(train.tolist()) | set(val.tolist()) | set(test.tolist())) == 5000  # disjoint
    for part, per_class in zip((train, val, test), (350, 50, 100)):
        assert np.bincount(labels[part], minlength=10).tolist() == [per_class] * 10


def test_histogram_entropy_by_hand(module):
    z = torch.tensor(
        [[1.0] * 8, [2.0] + [0.0] * 7, [1.0, 1.0] + [0.0] * 6]
    )  # uniform, one-hot, two equal
    assert module.histogram_entropy(z) == pytest.approx(
        (math.log(8) + 0.0 + math.log(2)) / 3, abs=1e-6
    )


def test_table_and_verdicts(module):
    def rows(l2):
        return [
            {"l2": v, "cosine": v, "map_c": 0.5, "entropy": 1.0, "steps": 100, "best_step": 50}
            for v in l2
        ]

    per_seed = {
        "gsp": rows([0.50, 0.52, 0.54]),
        "gsp_zsr": rows([0.80, 0.82, 0.84]),
        "gsp_zsr_s1": rows([0.30, 0.31, 0.32]),
        "gsp_zsr_l01": rows([0.51, 0.53, 0.60]),
        "gap_xml0": rows([0.40, 0.41, 0.42]),
        "gap_xml": rows([0.35, 0.40, 0.50]),
    }
    summary = module.summarize(per_seed)
    assert summary["gsp"]["l2"]["mean"] == pytest.approx(0.52) and summary["gsp"]["l2"][
        "std"
    ] == pytest.approx(0.02)
    assert summary["gsp"]["steps"] == ["50/100"] * 3
    last = module.summarize(
        {m: rows([0.2, 0.2, 0.2]) for m in per_seed}
    )  # the verdicts must not read these
    [zsr, xml] = module.reproduction({"frozen": {"summary": {"selected": summary, "last": last}}})
    verdicts = zsr["verdict"].split("; ")
    assert verdicts[0].startswith(
        "λ 0.5, s 9.5, unit init = default: L2 reproduced, cos reproduced"
    )
    assert verdicts[1].startswith(
        "λ 0.5, s 1 = paper, he_normal init: L2 not reproduced (no ZSR as high or higher)"
    )
    assert verdicts[2].startswith("λ 0.1, s 9.5, he_normal init: L2 partly")
    assert (
        "GSP + PNCA: L2 0.520 ± 0.020, cos 0.520 ± 0.020 (last weights: L2 0.200 ± 0.000)"
        in zsr["ours"]
    )
    assert xml["verdict"].startswith("L2 partly") and "MAP_c 0.500 ± 0.000" in xml["ours"]
    table = module.summary_table({"selected": summary, "last": last})
    assert (
        table.count("| GSP + PNCA |") == 2
        and "| 0.520 ± 0.020 |" in table
        and "| 0.200 ± 0.000 |" in table
    )


def test_zsr_selected_before_it_acted_is_not_reproduced(module):
    """A ZSR model whose every seed kept weights from before the prototypes were initialised (zero
    attributes, so L_ZS never acted) is no evidence for ZSR, however high its accuracy."""

    def entry(l2, steps):
        return {
            "l2": {"mean": l2, "std": 0.01},
            "cosine": {"mean": l2, "std": 0.01},
            "entropy": {"mean": 0.1, "std": 0.0},
            "steps": steps,
        }

    early, late = (
        [f"{module.ZSR_STARTS}/175", "25/175", "0/175"],
        ["25/175", f"{module.ZSR_STARTS + 1}/300", "25/175"],
    )
    no_zsr, last = entry(0.4, ["500/600"] * 3), entry(0.2, ["175/175"] * 3)
    verdict = module.zsr_verdict(entry(0.6, early), no_zsr, last)
    assert verdict.startswith(
        f"not reproduced (every seed selected its step-{module.ZSR_STARTS}/25/0 weights, before L_ZS acted"
    )
    assert "last weights score L2 0.200 ± 0.010" in verdict
    assert module.zsr_verdict(entry(0.6, late), no_zsr, last) == "L2 reproduced, cos reproduced"
    assert (
        module.ZSR_STARTS * module.BATCH
        >= module.GSP["memory_size"]
        > (module.ZSR_STARTS - 1) * module.BATCH
    )


def test_merge_replaces_only_the_rerun_models(module, tmp_path, monkeypatch):
    def payload(models, l2, seconds, steps=600):
        rows = {
            m: [
                {
                    "l2": l2,
                    "cosine": l2,
                    "map_c": 0.3,
                    "entropy": 1.0,
                    "steps": 600,
                    "best_step": 500,
                }
            ]
            * 3
            for m in models
        }
        summary = {w: module.summarize(rows) for w in module.WEIGHTS}
        return {
            "plan": {**module.FULL, "steps": steps, "seeds": [0, 1, 2], "models": models},
            "summary": summary,
            "table": "",
            "seconds": seconds,
            "class_histograms_seed0": {w: {m: [[1.0]] for m in models} for w in module.WEIGHTS},
        }

    published = tmp_path / "results.json"
    published.write_text(
        module.json.dumps({"runs": {"frozen": payload(["gsp", "gap_xml0", "gap_xml"], 0.3, 100.0)}})
    )
    monkeypatch.setattr(module, "PUBLISHED", published)
    new = module.merged("frozen", payload(["gap_xml0"], 0.6, 10.0))
    assert list(new["summary"]["selected"]) == ["gsp", "gap_xml0", "gap_xml"]  # order kept
    assert new["summary"]["last"]["gap_xml0"]["l2"]["mean"] == pytest.approx(0.6)
    assert new["summary"]["selected"]["gsp"]["l2"]["mean"] == pytest.approx(0.3)
    assert new["seconds"] == pytest.approx(110.0) and new["plan"]["merged"] == ["gap_xml0"]
    assert new["merges"] == [{"models": ["gap_xml0"], "seconds": 10.0, "precision": "auto"}]
    assert new["table"] == module.summary_table(new["summary"])
    with pytest.raises(SystemExit, match="another plan"):
        module.merged("frozen", payload(["gap_xml0"], 0.6, 10.0, steps=300))


def test_zsr_loss_at_init_grows_with_scale_and_few_classes(module):
    """Class embeddings drawn he_normal (the authors' code: std sqrt(2 / c)) have ||v||^2 ~ 2d/c:
    with 10 classes the initial logits, hence L_ZS, are far larger than with 100, and larger with
    s = 9.5 than 1. The unit init (std 1/sqrt(d)) keeps L_ZS within a few ln c at either count."""
    ten_code, ten_paper, hundred_code = (
        module.zsr_loss_at_init(c, s, "he_normal", draws=2)
        for c, s in ((10, 9.5), (10, 1.0), (100, 9.5))
    )
    assert ten_code > 5 * ten_paper > 5 * math.log(10) and ten_code > 5 * hundred_code
    for c in (10, 100):
        assert module.zsr_loss_at_init(c, 9.5, draws=2) < 3 * math.log(c)


def test_the_scale_curve_models_draw_their_stated_scale(module):
    """Each point of the scale curve draws class embeddings with mean ``||v_y||^2`` at its stated
    value (the named inits at this study's 10 classes, 128-D), by 4,000 classes' rows."""
    from gspdml.losses import build_loss

    torch.manual_seed(0)
    for model, norm2 in module.SCALE_CURVE.items():
        loss = module.MODELS[model][2]
        rows = build_loss(loss, "loss", embedding_dim=128, num_classes=10)
        if loss["class_init"] != "he_normal":  # its std depends on the class count: 10 only
            rows = build_loss(loss, "loss", embedding_dim=128, num_classes=4000)
        assert rows.class_embeddings.detach().pow(2).sum(1).mean().item() == pytest.approx(
            norm2, rel=0.05 if len(rows.class_embeddings) > 10 else 0.25
        )
    assert set(module.SCALE_ONLY) == set(module.SCALE_CURVE) - {"gsp_zsr", "gsp_zsr_he"}


def test_scale_row_and_curve_plot(module, tmp_path):
    """The README row of a run with the scale curve's models compares each point with GSP alone
    (selected weights by the ZSR rule, last weights by the README rule), in ``||v||^2`` order; the
    plot is written."""

    def entries(l2_by_model):
        return module.summarize(
            {
                m: [
                    {
                        "l2": v,
                        "cosine": v,
                        "map_c": 0.3,
                        "entropy": 1.0,
                        "steps": 600,
                        "best_step": 500,
                    }
                    for v in values
                ]
                for m, values in l2_by_model.items()
            }
        )

    selected = entries(
        {
            "gsp": [0.40, 0.42, 0.44],
            "gsp_zsr_he": [0.19, 0.20, 0.21],
            "gsp_zsr": [0.60, 0.62, 0.64],
            "gsp_zsr_v2.56": [0.41, 0.43, 0.45],
        }
    )
    (row,) = [
        r
        for r in module.reproduction({"x": {"summary": {"selected": selected, "last": selected}}})
        if "initial scale" in r["experiment"]
    ]
    assert row["verdict"].split("; ") == [
        "‖v‖² 1: L2 reproduced, cos reproduced, last weights L2 reproduced",
        "‖v‖² 2.56: L2 partly (highest mean, within one std of another), cos partly (highest mean, "
        "within one std of another), last weights L2 partly (highest mean, within one std of another)",
        "‖v‖² 25.6: L2 not reproduced (no ZSR as high or higher), cos not reproduced (no ZSR as high "
        "or higher), last weights L2 not reproduced (no ZSR as high or higher)",
    ]
    assert row["ours"].startswith(
        "GSP + PNCA: L2 0.420 ± 0.020 (last weights 0.420 ± 0.020); ‖v‖² 1:"
    )
    module.plot_scale_curve({"selected": selected, "last": selected}, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 5_000


def test_parallel_runs_equal_serial_ones(module, smoke, tmp_path):
    """``--jobs 2`` (the script run as a command, as users run it) trains each (seed, model) in
    its own process with the same results as the smoke run trained them one after the other."""
    models = ["gsp", "gsp_zsr"]
    script = ROOT / "experiments" / "zero_shot_attributes" / "run.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    argv = ["--smoke", "--models", *models, "--seeds", "0", "--jobs", "2"]
    subprocess.run(
        [sys.executable, str(script), *argv, "--out", str(tmp_path / "parallel")],
        env=env,
        check=True,
        capture_output=True,
    )
    parallel = json.loads((tmp_path / "parallel" / "results.json").read_text())
    serial = json.loads(json.dumps(smoke[1]))  # a copy, as JSON has it
    for results in (serial, parallel):
        for rows in results["per_seed"].values():
            for row in rows.values():
                row[0].pop("seconds")
    for weights in module.WEIGHTS:
        assert list(parallel["per_seed"][weights]) == models
        for model in models:
            assert parallel["per_seed"][weights][model] == serial["per_seed"][weights][model]
            assert parallel["summary"][weights][model] == serial["summary"][weights][model]
