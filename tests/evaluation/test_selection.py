"""The selection metrics of a validation round: the harmonic mean of NMI and R@1 (ProxyNCA++
code, ``train.py``), NMI on a fixed clustering against scikit-learn and a hand computation, and
the post-processed metrics of a round against the post-processing function itself."""

import math

import numpy as np
import pytest
from sklearn.metrics import normalized_mutual_info_score

from gspdml.errors import ConfigError
from gspdml.evaluation import clustering
from gspdml.evaluation.postprocess import postprocessed_metrics
from gspdml.evaluation.selection import (
    POSTPROCESSED_PREFIX,
    ROUND_METRICS,
    SELECTION_METRICS,
    harmonic_mean,
    needs_clustering,
    selection_value,
)
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings


def round_metrics(*embeddings, metric, postprocess=(), train=None):
    """The flat report of a round selected by ``metric``, as the trainer scores it."""
    spec = EvalSpec(metrics=ROUND_METRICS, selection=metric, postprocess=tuple(postprocess))
    return evaluate_embeddings(*embeddings, spec=spec, train=train).metrics


def clusters(n=60, dim=8, classes=5, noise=0.6, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(classes), n // classes)
    x = rng.normal(size=(classes, dim))[labels] + noise * rng.normal(size=(len(labels), dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), labels


def test_harmonic_mean_by_hand():
    assert harmonic_mean(0.6, 0.8) == pytest.approx(2 * 0.48 / 1.4)  # 0.685714...
    assert harmonic_mean(0.6, 0.8) == pytest.approx(0.6857142857142857)
    assert harmonic_mean(0.8, 0.6) == harmonic_mean(0.6, 0.8)
    assert harmonic_mean(0.0, 0.0) == 0.0 and harmonic_mean(0.0, 0.7) == 0.0
    assert harmonic_mean(0.5, 0.5) == pytest.approx(0.5)
    # the released code without --eval_nmi sets NMI = 1: 2 R / (1 + R) orders rounds as R@1 does
    r = np.linspace(0.05, 0.95, 19)
    assert np.all(np.diff([harmonic_mean(1.0, x) for x in r]) > 0)


def test_nmi_of_a_fixed_clustering_matches_sklearn_and_the_hand_value(monkeypatch):
    x, labels = clusters(n=12, classes=3)
    fixed = np.array([0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2])  # labels 0000 1111 2222
    monkeypatch.setattr(clustering, "kmeans_assignments", lambda *a, **k: fixed)
    metrics = round_metrics(x, labels, metric="nmi_r1_hmean")
    assert metrics["nmi"] == pytest.approx(normalized_mutual_info_score(labels, fixed))
    # by hand: NMI = 2 I(Y;C) / (H(Y) + H(C)) from the contingency table (natural logarithms)
    table = np.zeros((3, 3))
    np.add.at(table, (labels, fixed), 1)
    p = table / table.sum()
    py, pc = p.sum(1), p.sum(0)
    mutual = sum(
        p[i, j] * math.log(p[i, j] / (py[i] * pc[j]))
        for i in range(3)
        for j in range(3)
        if p[i, j] > 0
    )
    entropy = lambda q: -sum(v * math.log(v) for v in q if v > 0)
    assert metrics["nmi"] == pytest.approx(2 * mutual / (entropy(py) + entropy(pc)))
    assert metrics["nmi_r1_hmean"] == pytest.approx(
        harmonic_mean(metrics["nmi"], metrics["precision_at_1"])
    )
    assert metrics["precision_at_1"] == pytest.approx(
        evaluate_embeddings(x, labels).metrics["precision_at_1"]
    )


def test_kmeans_nmi_of_separated_classes_is_one_and_only_computed_when_selection_needs_it(
    monkeypatch,
):
    x, labels = clusters(noise=0.05)
    metrics = round_metrics(x, labels, metric="nmi_r1_hmean")
    assert metrics["nmi"] == pytest.approx(1.0) and metrics["precision_at_1"] == 1.0
    assert metrics["nmi_r1_hmean"] == pytest.approx(1.0)

    def no_kmeans(*args, **kwargs):
        raise AssertionError("k-means ran for a selection metric that does not need it")

    monkeypatch.setattr(clustering, "kmeans_assignments", no_kmeans)
    for metric in SELECTION_METRICS:
        if not needs_clustering(metric):
            out = round_metrics(x, labels, metric=metric)
            assert "nmi" not in out and "nmi_r1_hmean" not in out
            full = evaluate_embeddings(x, labels).metrics  # the default report: the round's metrics
            assert out == {k: v for k, v in full.items() if k in out and k != "k"} | {"k": out["k"]}
            assert set(full) == set(out)


def test_round_metrics_name_the_field_of_an_unknown_metric():
    x, labels = clusters()
    with pytest.raises(ConfigError) as err:
        round_metrics(x, labels, metric="nmi")
    assert err.value.field == "evaluation.metric" and "nmi_r1_hmean" in str(err.value)


@pytest.mark.parametrize("gallery", [False, True])
def test_postprocessed_round_metrics_are_the_post_processing_functions(gallery):
    x, labels = clusters(n=80)
    train, _ = clusters(n=40, seed=1)
    steps = [{"name": "pca_whiten", "dim": 6}, "dba", "qe:k=3,alpha=2.0"]
    args = (x[:40], labels[:40], x[40:], labels[40:]) if gallery else (x, labels)
    metrics = round_metrics(*args, metric="map_at_r", postprocess=steps, train=train)
    expected = postprocessed_metrics(*args, steps=steps, train=train, metrics=ROUND_METRICS)
    assert {
        k[len(POSTPROCESSED_PREFIX) :]: v
        for k, v in metrics.items()
        if k.startswith(POSTPROCESSED_PREFIX)
    } == expected
    plain = {k: v for k, v in metrics.items() if not k.startswith(POSTPROCESSED_PREFIX)}
    full = evaluate_embeddings(*args).metrics  # also the whole-ranking mAP and MRR, deeper k
    assert plain == {k: v for k, v in full.items() if k in plain and k != "k"} | {"k": plain["k"]}
    assert selection_value(metrics, "map_at_r", postprocessed=True) == expected["map_at_r"]
    assert selection_value(metrics, "map_at_r") == metrics["map_at_r"]


def test_evaluation_clustering_adds_nmi_to_full_reports_only():
    """``evaluation.clustering: true`` puts NMI (sklearn's, of a seed-0 k-means with one cluster
    per class) into the test split's full report, not into a validation round's, and NMI gets
    no post-processed twin in a summary."""
    from sklearn.cluster import KMeans

    from gspdml.evaluation.selection import round_metrics as validation_round_metrics
    from gspdml.evaluation.service import with_postprocessed
    from gspdml.settings.sections import EvaluationConfig

    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(5), 6)
    emb = rng.standard_normal((30, 8)).astype(np.float32) + labels[:, None]
    section = EvaluationConfig(clustering=True, postprocess=("qe",))
    report = evaluate_embeddings(emb, labels, spec=EvalSpec.from_evaluation(section)).metrics
    clusters = KMeans(n_clusters=5, n_init=1, random_state=0).fit_predict(emb)
    assert report["nmi"] == pytest.approx(normalized_mutual_info_score(labels, clusters))
    round_spec = EvalSpec.from_evaluation(section, metrics=validation_round_metrics())
    assert not round_spec.needs_clustering
    assert not EvalSpec.from_evaluation(EvaluationConfig()).needs_clustering
    twins = with_postprocessed(("map_at_r", "nmi"), EvalSpec.from_evaluation(section))
    assert twins == ("map_at_r", "nmi", "postprocessed_map_at_r")
