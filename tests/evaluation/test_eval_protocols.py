"""Protocol folds (class lists) and fair-protocol aggregation."""

import numpy as np
import pytest
import torch

from gspdml.data.splits import (
    contiguous_class_folds,
    fair_protocol_folds,
    train_test_classes,
    tuning_protocol_folds,
)
from gspdml.errors import ConfigError
from gspdml.evaluation import EvalSpec, fair_protocol_results, retrieval_metrics


def test_train_test_split_by_sorted_class_ids():
    train, test = train_test_classes(np.array([7, 3, 3, 200, 1, 9, 50]))
    assert train.tolist() == [1, 3, 7] and test.tolist() == [9, 50, 200]


@pytest.mark.parametrize("num_classes, folds", [(100, 4), (98, 4), (11317, 4), (100, 5), (7, 3)])
def test_folds_are_class_disjoint_and_cover_the_training_classes(num_classes, folds):
    classes = np.arange(1000, 1000 + num_classes)
    result = contiguous_class_folds(classes[::-1], folds)
    assert len(result) == folds
    for fold in result:
        assert len(np.intersect1d(fold.train_classes, fold.val_classes)) == 0
        assert np.array_equal(np.union1d(fold.train_classes, fold.val_classes), classes)
        assert len(fold.val_classes) == num_classes // folds
    vals = np.concatenate([f.val_classes for f in result])
    assert len(np.unique(vals)) == len(vals)  # validation blocks of different folds never overlap
    if num_classes % folds == 0:
        assert np.array_equal(np.sort(vals), classes)


def test_fair_folds_wrap_around_like_the_reference():
    folds = fair_protocol_folds(np.arange(100))  # CUB: fold f trains on 25f .. 25f+74 (mod 100)
    assert folds[0].val_classes.tolist() == list(range(75, 100))
    assert folds[1].val_classes.tolist() == list(range(25))
    assert folds[1].train_classes.tolist() == list(range(25, 100))
    assert folds[3].train_classes.tolist() == list(range(50)) + list(range(75, 100))  # wraps
    cars = fair_protocol_folds(
        np.arange(98)
    )  # 74 train / 24 val, starts int(f/4*98) = 0, 24, 49, 73
    assert [len(f.train_classes) for f in cars] == [74] * 4
    assert cars[2].val_classes.tolist() == list(range(25, 49))
    assert cars[3].val_classes.tolist() == list(range(49, 73))
    assert len(tuning_protocol_folds(np.arange(100))) == 5


def reference_split_manager(num_labels, folds=4, test_size=0.5):
    """powerful-benchmarker's MLRCSplitManager (Musgrave et al., ECCV 2020): split
    lengths from ratios of the total label count, the first half trains, and each fold keeps the
    labels inside wrapped, inclusive value ranges [a, b] of the sorted training labels."""
    labels = list(range(num_labels))
    val_ratio = (1.0 / folds) * (1 - test_size)
    lengths = {
        "train": int(num_labels * (1 - val_ratio) * (1 - test_size)),
        "val": int(num_labels * val_ratio),
        "test": int(num_labels * test_size),
    }
    lengths["train"] += num_labels - sum(lengths.values())
    trainval = labels[: lengths["test"]]
    out = []
    for fold in range(folds):
        start = int(float(fold) / folds * len(trainval))
        rules = {}
        for part in ("train", "val"):
            a, b = (
                trainval[start % len(trainval)],
                trainval[(start + lengths[part] - 1) % len(trainval)],
            )
            rules[part] = (
                (lambda x, a=a, b=b: a <= x <= b)
                if a < b
                else (lambda x, a=a, b=b: x >= a or x <= b)
            )
            start += lengths[part]
        out.append(
            ([x for x in trainval if rules["train"](x)], [x for x in trainval if rules["val"](x)])
        )
    return trainval, out


@pytest.mark.parametrize("training_classes", [100, 98, 11317, 10, 8])
def test_folds_match_the_reference_split_manager(training_classes):
    trainval, expected = reference_split_manager(2 * training_classes)
    train, _ = train_test_classes(np.arange(2 * training_classes))
    assert train.tolist() == trainval
    folds = fair_protocol_folds(train)
    assert [(f.train_classes.tolist(), f.val_classes.tolist()) for f in folds] == expected


def test_fold_errors_name_the_field():
    with pytest.raises(ConfigError, match="num_folds"):
        contiguous_class_folds(np.arange(3), 4)
    with pytest.raises(ConfigError, match="train_classes"):
        contiguous_class_folds(np.array([0.5, 1.5]), 2)


def fake_models(num_folds=4, seeds=(0, 1, 2), n=60, dim=5):
    g = torch.Generator().manual_seed(0)
    labels = np.repeat(np.arange(12), n // 12)
    centers = torch.randn(12, dim, generator=g, dtype=torch.float64)
    return {
        (f, s): (
            (centers[labels] + 1.5 * torch.randn(n, dim, generator=g, dtype=torch.float64)).float(),
            labels,
        )
        for f in range(num_folds)
        for s in seeds
    }


def unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_fair_protocol_has_81_realisations_with_128d_mean_and_512d_concatenation():
    models = fake_models()
    out = fair_protocol_results(models, spec=EvalSpec(recall_at=(1,)))
    assert out["num_realisations"] == 81 and len(out["realisations"]) == 81
    assert len({r["seeds"] for r in out["realisations"]}) == 81
    per_model = {key: retrieval_metrics(*split, recall_at=(1,)) for key, split in models.items()}
    for realisation in out["realisations"][::10]:
        keys = list(enumerate(realisation["seeds"]))
        assert realisation["128D"]["map_at_r"] == pytest.approx(
            np.mean([per_model[k]["map_at_r"] for k in keys])
        )
        concat = unit(np.hstack([unit(models[k][0]) for k in keys]))
        direct = retrieval_metrics(torch.from_numpy(concat), models[keys[0]][1], recall_at=(1,))
        assert realisation["512D"]["precision_at_1"] == pytest.approx(direct["precision_at_1"])
        assert realisation["512D"]["map_at_r"] == pytest.approx(direct["map_at_r"])
    values = [r["512D"]["map_at_r"] for r in out["realisations"]]
    assert out["summary"]["512D"]["map_at_r"]["mean"] == pytest.approx(np.mean(values))
    assert out["summary"]["512D"]["map_at_r"]["std"] == pytest.approx(np.std(values, ddof=1))
    assert out["summary"]["512D"]["map_at_r"]["mean"] > out["summary"]["128D"]["map_at_r"]["mean"]


def test_query_gallery_splits_and_a_single_seed():
    g = torch.Generator().manual_seed(1)
    q_labels, g_labels = np.arange(20) % 5, np.arange(30) % 5
    models = {
        (f, 0): (
            torch.randn(20, 4, generator=g),
            q_labels,
            torch.randn(30, 4, generator=g),
            g_labels,
        )
        for f in range(4)
    }
    out = fair_protocol_results(models, spec=EvalSpec(recall_at=(1,)))
    assert out["num_realisations"] == 1 and out["summary"]["128D"]["precision_at_1"]["std"] == 0.0
    keys = [(f, 0) for f in range(4)]
    direct = retrieval_metrics(
        torch.from_numpy(unit(np.hstack([unit(models[k][0]) for k in keys]))),
        q_labels,
        torch.from_numpy(unit(np.hstack([unit(models[k][2]) for k in keys]))),
        g_labels,
        recall_at=(1,),
    )
    assert out["realisations"][0]["512D"]["map_at_r"] == pytest.approx(direct["map_at_r"])


def test_aggregation_rejects_missing_seeds_and_mismatched_labels():
    models = fake_models(seeds=(0, 1))
    del models[(2, 1)]
    with pytest.raises(ConfigError, match="missing"):
        fair_protocol_results(models)
    models = fake_models(num_folds=2, seeds=(0,))
    models[(1, 0)] = (models[(1, 0)][0], models[(1, 0)][1][::-1])
    with pytest.raises(ConfigError, match="labels differ"):
        fair_protocol_results(models)


def test_fair_protocol_scores_post_processed_embeddings_and_concatenations():
    """With evaluation.postprocess the per-model and 512D numbers gain their post-processed
    twins: those of the steps on each model's embeddings and on the concatenations (test and
    training embeddings alike, so PCA-whitening learns in the space it is applied to)."""
    from gspdml.evaluation.postprocess import postprocessed_metrics

    models = fake_models(num_folds=2, seeds=(0, 1))
    g = torch.Generator().manual_seed(7)
    train = {key: torch.randn(40, 5, generator=g) for key in models}
    steps = ["pca_whiten:dim=4", "qe:k=1"]
    spec = EvalSpec(recall_at=(1,), postprocess=steps)
    out = fair_protocol_results(models, spec=spec, train_embeddings=train)
    key = (1, 0)
    expected = postprocessed_metrics(*models[key], steps=steps, train=train[key], recall_at=(1,))
    assert out["per_model"][key]["postprocessed_map_at_r"] == expected["map_at_r"]
    plain = retrieval_metrics(*models[key], recall_at=(1,))
    assert out["per_model"][key]["map_at_r"] == plain["map_at_r"]
    realisation = out["realisations"][1]
    keys = list(enumerate(realisation["seeds"]))
    concat = torch.from_numpy(unit(np.hstack([unit(models[k][0]) for k in keys])))
    concat_train = torch.from_numpy(unit(np.hstack([unit(train[k]) for k in keys])))
    expected = postprocessed_metrics(
        concat, models[keys[0]][1], steps=steps, train=concat_train, recall_at=(1,)
    )
    got = realisation["512D"]
    assert got["postprocessed_precision_at_1"] == pytest.approx(
        expected["precision_at_1"], abs=1e-12
    )
    assert got["postprocessed_map_at_r"] == pytest.approx(expected["map_at_r"], abs=1e-12)
    assert set(out["summary"]["512D"]) == {
        "precision_at_1",
        "map_at_r",
        "postprocessed_precision_at_1",
        "postprocessed_map_at_r",
    }
    with pytest.raises(ConfigError, match="training embeddings"):
        fair_protocol_results(models, spec=EvalSpec(postprocess=steps))
