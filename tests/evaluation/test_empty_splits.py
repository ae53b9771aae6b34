"""A split without query images is refused by every evaluation entry point with the error that
says so (:class:`NoQueryToScore`); it used to fail with ``k: must be in [1, -1]`` (leave-one-out)
or a bare ``ValueError: torch.cat(): expected a non-empty list of Tensors`` (query -> gallery,
and whenever the whole-ranking mAP was asked for)."""

from __future__ import annotations

import pytest
import torch

from gspdml.evaluation.exact_knn import retrieve
from gspdml.evaluation.metrics import NoQueryToScore, retrieval_metrics
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings, evaluate_queries

GALLERY = (torch.randn(5, 4, generator=torch.Generator().manual_seed(0)), [1, 1, 2, 2, 3])
SPLITS = {
    "leave-one-out": (torch.zeros(0, 4), []),
    "query -> gallery": (torch.zeros(0, 4), [], *GALLERY),
}
WHOLE = EvalSpec(metrics=("map_at_r", "mean_average_precision"))


@pytest.mark.parametrize("split", SPLITS, ids=str)
@pytest.mark.parametrize(
    "call",
    [
        lambda *a: retrieval_metrics(*a),
        lambda *a: retrieval_metrics(*a, metrics=("mean_average_precision",)),
        lambda *a: evaluate_embeddings(*a),
        lambda *a: evaluate_embeddings(*a, spec=WHOLE),
        lambda *a: evaluate_queries(*a, spec=WHOLE),
    ],
)
def test_a_split_without_queries_is_named_as_such(split, call):
    references = 0 if split == "leave-one-out" else 5
    expected = rf"no query to score: the split has no query images \({references} references\)"
    with pytest.raises(NoQueryToScore, match=expected):
        call(*SPLITS[split])


def test_the_search_of_no_query_is_empty():
    results = retrieve(torch.zeros(0, 4), [], *GALLERY)
    assert results.indices.shape == (0, 0) and len(results.reference_labels) == 5
