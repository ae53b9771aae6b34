"""Integer labels keep their identity whatever integer dtype each side has: numpy promotes int64
with uint64 to float64, so two ids above 2^53 became one class (uint64 query ids against int64
gallery ids scored P@1 = 1 where it is 0)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.metrics import retrieval_metrics
from gspdml.evaluation.results import encode_labels

BIG = 2**53  # float64 cannot tell BIG from BIG + 1


def test_uint64_and_int64_ids_above_2_53_stay_distinct():
    query = np.array([BIG, BIG + 1, BIG + 1], dtype=np.uint64)
    gallery = np.array([BIG, BIG + 1, BIG + 1, BIG + 2], dtype=np.int64)
    values, q_codes, r_codes = encode_labels(query, gallery)
    assert values.tolist() == [BIG, BIG + 1, BIG + 2]
    assert q_codes.tolist() == [0, 1, 1] and r_codes.tolist() == [0, 1, 1, 2]


def test_metrics_of_mixed_integer_dtypes_equal_those_of_the_labels_as_strings():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(12, 3, generator=g), torch.randn(20, 3, generator=g)
    query_ids = [BIG + i % 3 for i in range(12)]
    gallery_ids = [BIG + i % 4 for i in range(20)]
    as_strings = retrieval_metrics(x, [str(i) for i in query_ids], y, [str(i) for i in gallery_ids])
    mixed = retrieval_metrics(
        x, np.array(query_ids, dtype=np.uint64), y, np.array(gallery_ids, dtype=np.int64)
    )
    assert mixed == as_strings
    assert mixed["precision_at_1"] < 1.0  # the classes differ: not a single merged class


def test_ids_no_integer_type_holds_are_refused():
    with pytest.raises(ConfigError, match="labels: .*give the labels as strings"):
        encode_labels(np.array([-1, 2]), np.array([2**64 - 1], dtype=np.uint64))
