"""Bool labels are a kind of their own in the one label coding
(:func:`gspdml.evaluation.results.encode_labels`): bools alone score as two classes, exactly as
the same labels given as 0/1 integers, but bools mixed with integers are refused naming the
problem (True and 1 together are most likely a bug). Before, numpy's bool kind was coded as an
integer, so ``True`` and ``1`` became one class silently, and a Python list ``[True, 2]`` was
read as the integers ``[1, 2]``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.metrics import retrieval_metrics
from gspdml.evaluation.results import RetrievalResults, encode_labels

MIXED = "bool labels \\(True/False\\) mixed with integer labels: True and 1 would be scored"

PAIRS = {
    "python lists": ([True, False, True], [1, 0, 0]),
    "numpy arrays": (np.array([True, False]), np.array([1, 0])),
    "tensors": (torch.tensor([True, False]), torch.tensor([1, 0])),
    "one list": ([True, 2, None], None),
    "numpy bool in an object array": (np.array([np.True_, 3], dtype=object), None),
    "gallery of bools": (np.array([0, 1]), [False, None, True]),
}


@pytest.mark.parametrize("pair", PAIRS)
def test_bools_mixed_with_integers_are_refused(pair):
    query, reference = PAIRS[pair]
    with pytest.raises(ConfigError, match=f"labels: {MIXED}"):
        encode_labels(query, reference)


def test_bools_alone_are_two_classes_scored_as_the_same_labels_as_integers():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(10, 3, generator=g), torch.randn(16, 3, generator=g)
    query, gallery = [i % 2 == 0 for i in range(10)], [i % 3 == 0 for i in range(16)]
    values, q_codes, r_codes = encode_labels(query, np.array(gallery))
    assert values.tolist() == [False, True]
    assert q_codes.tolist() == [int(v) for v in query]
    assert r_codes.tolist() == [int(v) for v in gallery]
    as_ints = retrieval_metrics(x, [int(v) for v in query], y, [int(v) for v in gallery])
    assert retrieval_metrics(x, query, y, torch.tensor(gallery)) == as_ints
    assert retrieval_metrics(x, np.array(query)) == retrieval_metrics(x, np.array(query, int))


def test_unknown_bool_labels_and_saved_results_keep_their_kind(tmp_path):
    values, codes, _ = encode_labels([np.True_, None, False])
    assert values.tolist() == [False, True] and codes.tolist() == [1, -1, 0]
    indices = torch.tensor([[1], [0]])
    results = RetrievalResults.from_labels(indices, torch.zeros(2, 1), [True, False], [False, True])
    results.save(tmp_path / "results.safetensors")
    loaded = RetrievalResults.load(tmp_path / "results.safetensors")
    assert [hit.label for row in loaded.hits() for hit in row.results] == [True, False]
    assert loaded.relevance().tolist() == [[True], [True]]
