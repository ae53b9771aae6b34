"""`gspdml protocol fair|tuning|conventional` end to end on a tiny digits collage.

Cross-checks: each fold model trains on the classes of the protocol's fold; the 128D value of
every realisation is the mean of the per-model values, which equal the trainer's own test results;
the 512D value is recomputed here from the models' test embeddings with a slow leave-one-out
loop; the tables hold the summary; runs are reused, resumed or retrained model by model.
"""

import itertools
import json
import shutil

import numpy as np
import pytest
import yaml

from gspdml.cli import main
from gspdml.config import dump_config, load_config
from gspdml.data import build_data
from gspdml.data.splits import fair_protocol_folds
from gspdml.errors import ConfigError
from gspdml.workflows.protocol import _fold_config, run_protocol
from tests.helpers.tiny_runs import tiny_collage_data, tiny_model

SEEDS = (0, 1)


def tiny_config(tmp_path, **dataset):
    """8 training classes (4 folds of 6 + 2), 4 test classes, 16x16 collages, 2 steps per model."""
    config = {
        "name": "tiny",
        "output_dir": str(tmp_path / "runs"),
        "seed": 5,
        "data": {**tiny_collage_data(**dataset), "eval_batch_size": 64},
        "model": tiny_model(),
        "loss": {"name": "c2", "neg_margin": 0.5},
        "optimizer": {"lr": 3e-3},
        "schedule": {"max_steps": 2},
        "evaluation": {"every": 2, "patience": None, "recall_at": [1]},
        "trainer": {"progress": False, "log_every": 1},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(dump_config(config))
    return path


def unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def leave_one_out(embeddings, labels):
    """P@1 and MAP@R by a slow loop (Gürbüz thesis §1.2)."""
    x = unit(embeddings)
    p1, map_r = [], []
    for i in range(len(x)):
        d = ((x - x[i]) ** 2).sum(1)
        d[i] = np.inf
        order = np.argsort(d, kind="stable")
        r = int((labels == labels[i]).sum()) - 1
        rel = labels[order[:r]] == labels[i]
        p1.append(float(rel[0]))
        map_r.append(sum(rel[k] * rel[: k + 1].sum() / (k + 1) for k in range(r)) / r)
    return np.mean(p1), np.mean(map_r)


def mtimes(root):
    return {p.parent.name: p.stat().st_mtime_ns for p in root.glob("*/metrics.jsonl")}


def training_steps(run_dir):
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in lines if r["split"] == "train"]


def test_fair_protocol_end_to_end_and_resumable(tmp_path, capsys):
    config_path = tiny_config(tmp_path)
    assert main(["protocol", "fair", str(config_path), "--seeds", *map(str, SEEDS)]) == 0
    printed = capsys.readouterr().out
    root = tmp_path / "runs" / "tiny"
    names = [f"fold{f}-seed{s}" for f in range(4) for s in SEEDS]
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == sorted(names)
    folds = fair_protocol_folds(np.arange(8))

    # every fold model trained on its fold's classes and validated on the held-out ones
    for f, s in itertools.product(range(4), SEEDS):
        saved = yaml.safe_load((root / f"fold{f}-seed{s}" / "config.yaml").read_text())
        assert saved["seed"] == s and saved["evaluation"]["split"] == "val"
        data = build_data(saved["data"]["dataset"], seed=s)
        assert data.train.classes.tolist() == folds[f].train_classes.tolist()
        assert data.val.query.classes.tolist() == folds[f].val_classes.tolist()

    protocol = json.loads((root / "protocol.json").read_text())
    assert protocol["num_realisations"] == len(SEEDS) ** 4 == len(protocol["realisations"])
    assert len({tuple(r["seeds"]) for r in protocol["realisations"]}) == len(SEEDS) ** 4
    assert [f["val_classes"] for f in protocol["folds"]] == [f.val_classes.tolist() for f in folds]
    per_model = protocol["per_model"]
    tests = {}
    for name in names:
        trainer_result = json.loads((root / name / "results.json").read_text())["test"]
        for metric in ("precision_at_1", "map_at_r"):
            assert per_model[name][metric] == pytest.approx(trainer_result[metric], abs=1e-12)
        with np.load(root / name / "test_embeddings.npz") as cached:
            tests[name] = (cached["query"], cached["query_labels"])
    labels = tests[names[0]][1]
    for realisation in protocol["realisations"]:
        chosen = [f"fold{f}-seed{s}" for f, s in enumerate(realisation["seeds"])]
        for metric in ("precision_at_1", "map_at_r"):
            assert realisation["128D"][metric] == pytest.approx(
                np.mean([per_model[n][metric] for n in chosen]), abs=1e-12
            )
        concatenated = unit(np.hstack([unit(tests[n][0]) for n in chosen]))
        p1, map_r = leave_one_out(concatenated, labels)
        assert realisation["512D"]["precision_at_1"] == pytest.approx(p1, abs=1e-12)
        assert realisation["512D"]["map_at_r"] == pytest.approx(map_r, abs=1e-12)
    values = [r["512D"]["map_at_r"] for r in protocol["realisations"]]
    summary = protocol["summary"]
    assert summary["512D"]["map_at_r"]["mean"] == pytest.approx(np.mean(values))
    assert summary["512D"]["map_at_r"]["std"] == pytest.approx(np.std(values, ddof=1))
    # beside the 16 realisations' std, the std over the 8 independent models and over the 2
    # disjoint collections (seed s at every fold), each named with what it rests on
    models = [per_model[n]["map_at_r"] for n in names]
    assert summary["models"]["map_at_r"]["std"] == pytest.approx(np.std(models, ddof=1))
    diagonal = [
        r["512D"]["map_at_r"] for r in protocol["realisations"] if len(set(r["seeds"])) == 1
    ]
    assert len(diagonal) == len(SEEDS)
    assert summary["collections 512D"]["map_at_r"]["std"] == pytest.approx(np.std(diagonal, ddof=1))
    assert protocol["spread"]["512D"] == {"over": "realisations", "count": 16, "models": 8}
    assert protocol["spread"]["models"] == {"over": "models", "count": 8, "models": 8}

    # the table, in the layout of thesis Tab. 5.1, printed and written as Markdown and JSON
    table = (root / "results.md").read_text()
    assert printed == table
    header, rule, row = table.splitlines()
    assert header == "| Method | 512D P@1 | 512D MAP@R | 128D P@1 | 128D MAP@R | ± is the |"
    cells = [
        (space, metric) for space in ("512D", "128D") for metric in ("precision_at_1", "map_at_r")
    ]
    expected = " | ".join(
        f"{100 * summary[s][m]['mean']:.2f} ± {100 * summary[s][m]['std']:.2f}" for s, m in cells
    )
    assert row == (
        f"| tiny | {expected} | sample std over 16 realisations built from 8 models "
        "(realisations share models: not independent) |"
    )
    written = json.loads((root / "results.json").read_text())["tiny"]
    assert written["summary"] == summary and written["num_realisations"] == 16

    # resumable model by model
    config = load_config(config_path)
    before = mtimes(root)
    assert set(run_protocol(config, "fair", seeds=SEEDS)["runs"].values()) == {"done"}
    assert mtimes(root) == before
    shutil.rmtree(root / "fold2-seed1")  # a lost model is trained again
    (
        root / "fold1-seed0" / "results.json"
    ).unlink()  # a model killed after its last checkpoint is finished
    steps = training_steps(root / "fold1-seed0")
    again = run_protocol(config, "fair", seeds=SEEDS)
    assert again["runs"] == {
        n: {"fold2-seed1": "trained", "fold1-seed0": "resumed"}.get(n, "done") for n in names
    }
    untouched = {"fold2-seed1", "fold1-seed0"}
    assert {n: t for n, t in mtimes(root).items() if n not in untouched} == {
        n: t for n, t in before.items() if n not in untouched
    }
    assert (
        training_steps(root / "fold1-seed0") == steps
        and len(training_steps(root / "fold2-seed1")) == 2
    )
    # the same seed trains the same model again: every number is reproduced
    for name in names:
        assert again["per_model"][name] == pytest.approx(per_model[name], abs=1e-12)
    assert again["summary"]["512D"]["map_at_r"]["mean"] == pytest.approx(
        summary["512D"]["map_at_r"]["mean"]
    )

    changed = load_config(config_path, ["loss.neg_margin=0.4"])
    with pytest.raises(ConfigError, match="holds a run of another config .*loss.neg_margin"):
        run_protocol(changed, "fair", seeds=SEEDS)


def test_tuning_protocol_is_one_four_fifths_split_times_the_seeds(tmp_path):
    """Gürbüz thesis §5.3.4.1 (tuning), by hand for 10 training classes 0..9: one model per seed on classes 0..7,
    validated on the last fifth, classes 8 and 9; three seeds give three models, not 5 x 3."""
    config = load_config(tiny_config(tmp_path, class_split=[10, 0, 4]))
    out = run_protocol(config, "tuning", seeds=(0, 1, 2))
    assert [f["val_classes"] for f in out["folds"]] == [[8, 9]]
    assert [f["train_classes"] for f in out["folds"]] == [8]
    assert sorted(out["per_model"]) == ["fold0-seed0", "fold0-seed1", "fold0-seed2"]
    assert out["num_realisations"] == 3
    for name, metrics in out["per_model"].items():
        # the model was selected on its own validation classes: its best validation value is what we re-measure
        result = json.loads((tmp_path / "runs" / "tiny" / name / "results.json").read_text())
        assert metrics["map_at_r"] == pytest.approx(result["best_map_at_r"], abs=1e-12)
    values = [m["map_at_r"] for m in out["per_model"].values()]
    expected = {"mean": np.mean(values), "std": np.std(values, ddof=1)}
    assert out["summary"]["val"]["map_at_r"] == pytest.approx(expected)
    assert (tmp_path / "runs" / "tiny" / "results.md").read_text().splitlines()[
        0
    ] == "| Method | val P@1 | val MAP@R | ± is the |"


@pytest.mark.parametrize(
    "dataset, patience",
    [("cub", 10), ("cars196", 10), ("sop", 7), ("inshop", 7), ("collage_digits", 15)],
)
def test_tuning_protocol_patience_is_the_thesis_value_per_dataset(dataset, patience):
    """Gürbüz thesis §5.3.4.1 (tuning): patience 10 on CUB and Cars, 7 on SOP and In-shop; other datasets keep theirs."""
    config = load_config({"data": {"dataset": {"name": dataset}}, "evaluation": {"patience": 15}})
    assert _fold_config(config, "tuning", 0, 5, 0)["evaluation"]["patience"] == patience
    assert _fold_config(config, "fair", 0, 4, 0)["evaluation"]["patience"] == 15


def test_conventional_protocol_monitors_the_test_split(tmp_path, capsys):
    config_path = tiny_config(tmp_path)
    assert (
        main(
            [
                "protocol",
                "conventional",
                str(config_path),
                "data.dataset.val_fold=1",
                "--seeds",
                "0",
                "1",
            ]
        )
        == 0
    )
    root = tmp_path / "runs" / "tiny"
    results = {}
    for seed in (0, 1):
        saved = yaml.safe_load((root / f"seed{seed}" / "config.yaml").read_text())
        assert (
            saved["evaluation"]["split"] == "test" and saved["data"]["dataset"]["val_fold"] is None
        )  # the default: no fold
        log = [
            json.loads(line)
            for line in (root / f"seed{seed}" / "metrics.jsonl").read_text().splitlines()
        ]
        assert {r["split"] for r in log} == {"train", "test"}  # no validation split is looked at
        results[f"seed{seed}"] = json.loads((root / f"seed{seed}" / "results.json").read_text())[
            "test"
        ]
    protocol = json.loads((root / "protocol.json").read_text())
    best = max(results, key=lambda name: results[name]["map_at_r"])
    assert protocol["best_run"] == best
    assert protocol["summary"]["best"]["precision_at_1"]["mean"] == results[best]["precision_at_1"]
    header, _, row = capsys.readouterr().out.splitlines()
    assert header == (
        "| Method | R@1 | MAP@R | R@1 (all repeats) | MAP@R (all repeats) | ± is the |"
    )
    assert row.startswith(
        f"| tiny | {100 * results[best]['precision_at_1']:.2f} | {100 * results[best]['map_at_r']:.2f} | "
    )


def test_protocol_errors_name_the_problem(tmp_path):
    config = load_config(tiny_config(tmp_path, class_split=[8, 2, 4], background_split=[4, 1, 3]))
    with pytest.raises(ConfigError, match="val_fold.*already has 2 validation classes"):
        run_protocol(config, "fair", seeds=(0,))
    with pytest.raises(ConfigError, match="seeds"):
        run_protocol(config, "fair", seeds=(0, 0))
    with pytest.raises(ConfigError, match="num_folds.*must be in \\[2, 3\\]"):
        run_protocol(load_config(tiny_config(tmp_path, class_split=[3, 0, 4])), "fair", seeds=(0,))


def test_two_stage_protocol_replays_the_train_stage_drops_and_length(tmp_path):
    """ProxyNCA++'s train -> trainval (train.py --mode train, then --mode trainval): stage 2 runs
    on all training classes, warms up for as many epochs as stage 1, trains the main epochs up to
    the stage-1 best one and cuts the rate by the plateau factor one epoch after each epoch that
    stage 1 ran at a dropped rate (MultiStepLR.step(e) at the end of epoch e). An epoch is one
    validation round (evaluation.every) of stage 1 and twice that in stage 2 (twice the images)."""
    config = load_config(
        tiny_config(tmp_path),
        [
            "schedule.max_steps=12",
            "schedule.warmup_steps=2",
            "evaluation.every=1",
            "evaluation.during_warmup=false",
            "schedule.plateau={factor: 0.1, patience: 1, min_lr: 1.0e-9}",
        ],
    )
    out = run_protocol(config, "two_stage", seeds=(0,))
    root = tmp_path / "runs" / "tiny"
    stage1 = json.loads((root / "train-seed0" / "results.json").read_text())
    stage2 = yaml.safe_load((root / "trainval-seed0" / "config.yaml").read_text())
    assert stage1["lr_drop_steps"]  # patience 1 over 10 evaluations: the rate drops
    assert min(stage1["lr_drop_steps"]) > 2  # no round in the warm-up
    # 8 training classes of 4 images each; stage 1 trains on the first 4: stage-2 epochs are 2 steps
    best_epochs = stage1["best_step"] - 2  # main epochs up to and with the best
    length = 2 * 2 + 2 * best_epochs
    # stage 1 ran main epoch m = step - 2 at the dropped rate first; stage 2 drops after epoch m
    expected = [2 * 2 + 2 * (s - 2 + 1) for s in stage1["lr_drop_steps"]]
    expected = [m for m in expected if m < length]
    assert stage2["schedule"]["max_steps"] == length
    assert stage2["schedule"]["warmup_steps"] == 2 * 2
    assert stage2["schedule"]["fresh_optimizer_after_warmup"] is False  # as the config says
    assert stage2["schedule"]["plateau"] is None
    assert stage2["schedule"]["step_decay"] == (
        {"milestones": expected, "factor": 0.1} if expected else None
    )
    assert stage2["data"]["dataset"]["val_fold"] is None  # all training classes
    assert not stage2["evaluation"]["restore_best"]
    first = yaml.safe_load((root / "train-seed0" / "config.yaml").read_text())["data"]["dataset"]
    assert (first["val_fold"], first["num_folds"]) == (0, 2)
    assert (
        sorted(out["per_model"]) == ["trainval-seed0"] and out["stages"]["trainval-seed0"] == stage1
    )
    with pytest.raises(ConfigError, match="schedule.plateau"):
        run_protocol(load_config(tiny_config(tmp_path)), "two_stage", seeds=(0,))


def test_protocols_honour_evaluation_postprocess(tmp_path):
    """With evaluation.postprocess every summarised metric gains its post-processed twin, in
    the table too. Fair: PCA-whitening learns on each model's embeddings of all 8 training
    classes (cached beside the test embeddings). Tuning: each model's report is the trainer's
    own last validation round, post-processed metrics included. The old protocols ignored the
    steps (no postprocessed_* anywhere)."""
    from gspdml.evaluation.postprocess import postprocessed_metrics

    steps = ["pca_whiten:dim=4", "qe:k=1"]
    config = load_config(tiny_config(tmp_path), [f"evaluation.postprocess={steps}"])
    out = run_protocol(config, "fair", seeds=(0,))
    root = tmp_path / "runs" / "tiny"
    for name in ("fold0-seed0", "fold3-seed0"):
        with np.load(root / name / "test_embeddings.npz") as cached:
            query, labels, train = cached["query"], cached["query_labels"], cached["train"]
        assert len(train) == 8 * 4  # all training classes, whatever the fold
        expected = postprocessed_metrics(query, labels, steps=steps, train=train, recall_at=[1])
        assert out["per_model"][name]["postprocessed_map_at_r"] == expected["map_at_r"]
    assert set(out["summary"]["512D"]) == {
        "precision_at_1",
        "map_at_r",
        "postprocessed_precision_at_1",
        "postprocessed_map_at_r",
    }
    header = (root / "results.md").read_text().splitlines()[0]
    titles = [f"{space} {metric}" for space in ("512D", "128D") for metric in ("P@1", "MAP@R")]
    cells = " | ".join(f"{t} | {t} (post-processed)" for t in titles)
    assert header == f"| Method | {cells} | ± is the |"

    (tmp_path / "tuning").mkdir()
    config = load_config(
        tiny_config(tmp_path / "tuning", class_split=[10, 0, 4]),
        [f"evaluation.postprocess={steps}"],
    )
    out = run_protocol(config, "tuning", seeds=(0,))
    run_dir = tmp_path / "tuning" / "runs" / "tiny" / "fold0-seed0"
    log = (run_dir / "metrics.jsonl").read_text().splitlines()
    last_round = [r for r in map(json.loads, log) if r["split"] == "val"][-1]
    report = out["per_model"]["fold0-seed0"]
    assert report == {k: v for k, v in last_round.items() if k not in ("step", "split", "best")}
    summary = out["summary"]["val"]
    assert summary["postprocessed_map_at_r"]["mean"] == report["postprocessed_map_at_r"]


def test_conventional_protocol_tabulates_nmi_when_the_config_clusters(tmp_path, capsys):
    """``evaluation.clustering: true``: each model's results.json records NMI for the test
    split, the summary aggregates it and the table gets NMI columns beside MAP@R."""
    config_path = tiny_config(tmp_path)
    argv = ["protocol", "conventional", str(config_path), "evaluation.clustering=true"]
    assert main([*argv, "--seeds", "0"]) == 0
    root = tmp_path / "runs" / "tiny"
    nmi = json.loads((root / "seed0" / "results.json").read_text())["test"]["nmi"]
    protocol = json.loads((root / "protocol.json").read_text())
    assert protocol["summary"]["best"]["nmi"]["mean"] == nmi
    assert protocol["summary"]["repeats"]["nmi"]["mean"] == nmi
    header, _, row = capsys.readouterr().out.splitlines()
    assert header == (
        "| Method | R@1 | MAP@R | R@1 (all repeats) | MAP@R (all repeats) | NMI | NMI (all repeats) "
        "| ± is the |"
    )
    *_, best_nmi, all_nmi, spread, _ = row.split("|")
    assert (best_nmi.strip(), all_nmi.strip()) == (f"{100 * nmi:.2f}", f"{100 * nmi:.2f}")
    assert spread.strip()  # what the ± is over
