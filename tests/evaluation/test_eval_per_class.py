"""Per-query and per-class metrics of the evaluation service (evaluate_queries), against a slow
loop written from the definitions (Musgrave et al., "A Metric Learning Reality Check", §3.2)."""

import math

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation import EvalSpec, evaluate_embeddings, evaluate_queries
from tests.helpers.knn_reference import slow_query_scores


def test_per_class_metrics_match_a_slow_loop():
    rng = np.random.default_rng(3)
    names = ["ant", "bee", "cat", "dog", "eel"]
    sizes = [2, 3, 5, 4, 1]  # "eel" has one image: its query is lone, the class is not scored
    labels = [name for name, size in zip(names, sizes) for _ in range(size)]
    centres = {name: rng.normal(size=4) for name in names}
    x = np.stack([centres[name] + rng.normal(scale=1.2, size=4) for name in labels])
    spec = EvalSpec(recall_at=(1, 2, 4))
    evaluation = evaluate_queries(torch.from_numpy(x), labels, spec=spec, min_k=6)

    expected = {}
    per_query = [slow_query_scores(x, labels, i, (1, 2, 4)) for i in range(len(labels))]
    for name in names:
        scored = [s for s, label in zip(per_query, labels) if label == name and s is not None]
        if scored:
            expected[name] = {key: np.mean([s[key] for s in scored]) for key in scored[0]}
    assert set(evaluation.per_class) == set(expected) == {"ant", "bee", "cat", "dog"}
    for name, values in expected.items():
        row = evaluation.per_class[name]
        assert row["num_queries"] == sizes[names.index(name)] and row["num_lone_queries"] == 0
        for key, value in values.items():
            assert row[key] == pytest.approx(value, abs=1e-12), (name, key)
    # per query: the same numbers, NaN for the lone query; they average to the service's report
    for i, scores in enumerate(per_query):
        if scores is None:
            assert math.isnan(float(evaluation.scores["map_at_r"][i]))
            continue
        for key, value in scores.items():
            assert float(evaluation.scores[key][i]) == pytest.approx(value, abs=1e-12)
    report = evaluate_embeddings(torch.from_numpy(x), labels, spec=spec).metrics
    scored = [s for s in per_query if s is not None]
    assert report["map_at_r"] == pytest.approx(np.mean([s["map_at_r"] for s in scored]))
    assert evaluation.results.k >= 6  # deep enough to show six neighbours


def test_the_worst_queries_come_first_and_lone_ones_are_left_out():
    x = torch.tensor([[0.0], [0.3], [5.0], [5.2], [1.0], [9.0]], dtype=torch.float64)
    labels = ["a", "a", "b", "b", "b", "c"]  # query 4 (b) sits among the a's; 5 is lone
    evaluation = evaluate_queries(x, labels)
    worst = evaluation.worst(6)
    assert worst[0] == 4 and 5 not in worst and sorted(worst) == [0, 1, 2, 3, 4]
    maps = [float(evaluation.scores["map_at_r"][i]) for i in worst]
    assert maps == sorted(maps)
    with pytest.raises(ConfigError, match="no per-query score 'nmi'"):
        evaluation.worst(2, key="nmi")
    with pytest.raises(ConfigError, match="plain search"):
        evaluate_queries(x, labels, spec=EvalSpec(postprocess=({"name": "qe"},)))
