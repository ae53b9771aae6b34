"""The metric registry: one registration makes a metric reach the nested results, the flat
report, the selection and the search depth; the evaluation service's report schema."""

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation import metric_registry as registry
from gspdml.evaluation import retrieval_metrics, selection
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings


def clusters(n=60, dim=6, classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % classes
    x = torch.randn(classes, dim, generator=g)[labels] + 0.8 * torch.randn(n, dim, generator=g)
    return x, labels.numpy()


def slow_precision_at(x, labels, depth):
    """Leave-one-out precision among the first ``depth`` neighbours (distance, then index)."""
    x = x.double()
    values = []
    for i in range(len(x)):
        d = ((x - x[i]) ** 2).sum(1).tolist()
        order = [j for j in sorted(range(len(x)), key=lambda j: (d[j], j)) if j != i][:depth]
        values.append(np.mean([labels[j] == labels[i] for j in order]))
    return float(np.mean(values))


@pytest.fixture
def precision_at_5():
    """A metric added by one registration (removed after the test)."""
    registry.register("precision_at_5", "query", depth=5, selectable=True)(
        lambda n: n.relevance_all[:, :5].to(torch.float64).mean(1)
    )
    yield registry.METRICS["precision_at_5"]
    del registry.METRICS["precision_at_5"]


def test_one_registration_reaches_results_report_selection_and_search_depth(precision_at_5):
    x, labels = clusters()
    expected = slow_precision_at(x, labels, 5)
    nested = retrieval_metrics(x, labels, recall_at=(1,))
    assert nested["precision_at_5"] == pytest.approx(expected, abs=1e-12)
    report = evaluate_embeddings(
        x, labels, spec=EvalSpec(recall_at=(1,), selection="precision_at_5")
    )
    assert report.metrics["precision_at_5"] == pytest.approx(expected, abs=1e-12)
    assert report.selection_value() == report.metrics["precision_at_5"]
    assert "precision_at_5" in selection.SELECTION_METRICS
    selection.check_selection_metric("precision_at_5")
    # the declared depths decide how deep the search goes: R_i = 11 for MAP@R, 5 alone for P@5;
    # the default report leaves out the whole-ranking mAP and MRR (computed when named)
    only = evaluate_embeddings(
        x,
        labels,
        spec=EvalSpec(metrics=("precision_at_5",), recall_at=(1,), selection="precision_at_5"),
    )
    assert only.metrics["k"] == 5
    assert set(only.metrics) == {"precision_at_5", "num_queries", "num_lone_queries", "k"}
    assert report.metrics["k"] == 11 and "mean_average_precision" not in report.metrics
    round_spec = EvalSpec(
        metrics=selection.round_metrics(), recall_at=(1,), selection="precision_at_5"
    )
    rounds = evaluate_embeddings(x, labels, spec=round_spec).metrics
    assert rounds["k"] == 11 and "mean_average_precision" not in rounds
    assert "precision_at_5" in rounds


def test_the_flat_report_schema():
    x, labels = clusters()
    spec = EvalSpec(recall_at=(1, 3), selection="nmi_r1_hmean")
    report = evaluate_embeddings(x, labels, spec=spec)
    knn_metrics = [
        "map_at_r",
        "precision_at_1",
        "r_precision",
        "recall_at_1",
    ]
    counts = ["num_queries", "num_lone_queries", "k"]
    expected = [*knn_metrics, "recall_at_3", "nmi", "ami", *counts, "nmi_r1_hmean"]
    assert list(report.metrics) == expected
    nested = retrieval_metrics(x, labels, recall_at=(1, 3), clustering=True)
    assert report.metrics["recall_at_3"] == nested["recall_at_k"][3]
    assert report.metrics["nmi"] == nested["nmi"]
    assert isinstance(report.metrics["k"], int)
    steps = ["qe:k=1"]
    post = evaluate_embeddings(x, labels, spec=EvalSpec(recall_at=(1,), postprocess=steps))
    twins = [k for k in post.metrics if k.startswith("postprocessed_")]
    assert twins == ["postprocessed_" + k for k in (*knn_metrics, *counts)]
    assert post.postprocessed()["map_at_r"] == post.metrics["postprocessed_map_at_r"]
    one = evaluate_embeddings(x, labels, spec=EvalSpec(metrics=("map_at_r",), postprocess=steps))
    assert list(one.postprocessed()) == ["map_at_r", *counts]
    assert one.postprocessed()["map_at_r"] == post.postprocessed()["map_at_r"]


def test_registration_errors_name_the_problem():
    with pytest.raises(ConfigError, match="registered twice"):
        registry.register("map_at_r", "query", depth=1)(lambda n: n.hits[:, 0])
    with pytest.raises(ConfigError, match="unknown metric kind 'pairs'"):
        registry.register("x", "pairs")
    with pytest.raises(ConfigError, match="a depth is what a per-query metric"):
        registry.register("x", "query")
    with pytest.raises(ConfigError, match="reads unregistered metrics"):
        registry.register("x", "derived", inputs=("nope",))(lambda values: 0.0)
    with pytest.raises(ConfigError, match=r"metrics: unknown metric\(s\) \['map_at_q'\]"):
        EvalSpec(metrics=("map_at_q",))
    with pytest.raises(ConfigError, match="evaluation.metric: unknown metric 'ami'"):
        EvalSpec(selection="ami")
