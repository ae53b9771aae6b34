"""FreeDom's oracle experiment (Psomas thesis §4.4.7, Table 4.6): one word of ground truth
injected into the m text labels of every query image.

* ``object`` ("information injection", inlier): the query image's true class name is added to
  its m text labels; the mAP gained shows how much the method can use correct information.
* ``domain`` (outlier): the query image's source-domain name is added as a distractor; the mAP
  lost shows how robust the composition is to conflicting domain information.
* ``none``: FreeDom as it is.

The added word is the (m+1)-th label: after the m words in the early-fusion string
``w_1 … w_m w_oracle t`` (Eq. 4.10), and one more late-fusion term ``g(w_oracle ⊕ t)`` (Eq. 4.12)
with the largest weight of the labels (1 for the uniform weights of E⁺ / L⁺, the variants of
Table 4.6). The thesis does not say where the word goes in the early-fusion string nor which
weight it gets under frequency weights; these are this module's choices. A class name is the
benchmark's class label with ``_`` read as a space (the FreeDom release lists names, e.g.
``african_elephant``); a domain name is the domain's query text (``photo`` for ``real``).

An evaluation with an oracle also evaluates the same method without it and reports the
difference, ``map_change`` (mAP points, oracle − none), per group and as the mean of the groups:
the cells of Table 4.6 (:func:`add_oracle_change`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gspdml.errors import ConfigError, DataError

from .composition_protocol import CompositionProtocol
from .freedom import FreeDom, TextLabels, compose

ORACLES = ("none", "object", "domain")


def oracle_words(protocol: CompositionProtocol, oracle: str) -> list[str]:
    """The word the ``oracle`` adds for each query image of ``protocol``."""
    if oracle not in ORACLES:
        raise ConfigError(
            "oracle", f"unknown oracle {oracle!r}; choose one of {', '.join(ORACLES)}"
        )
    known = protocol.query_classes if oracle == "object" else protocol.query_domains
    if len(known) != len(protocol.query_images):
        raise DataError(
            f"the {oracle} oracle needs each query image's "
            f"{'class' if oracle == 'object' else 'source domain'}: a domain-conversion "
            "protocol (a FreeDom benchmark or a labels CSV) has them, this one does not"
        )
    return [word.replace("_", " ") for word in known]


def with_oracle(labels: Sequence[TextLabels], words: Sequence[str]) -> list[TextLabels]:
    """Each query's labels with its oracle word appended, weighted as its heaviest label."""
    return [
        TextLabels([*label.words, word], [*label.weights, max(label.weights, default=1.0)])
        for label, word in zip(labels, words)
    ]


def oracle_scores(
    freedom: FreeDom,
    image_queries: torch.Tensor,
    words: Sequence[str],
    targets: Sequence[str],
    database: torch.Tensor,
) -> torch.Tensor:
    """s(q, x) ``[Q, N]`` of ``freedom`` with the oracle ``words`` (one per query) added."""
    labels = with_oracle(freedom.invert(image_queries), words)
    composed = compose(labels, targets, freedom.encode_text, freedom.fusion, freedom.renormalize)
    return composed @ database.T


def add_oracle_change(result: dict[str, Any], without: dict[str, Any]) -> dict[str, Any]:
    """``result`` (with the oracle) with ``map_change`` = its mAP − ``without`` 's, per group
    and as the mean of the groups."""
    for group, row in result["groups"].items():
        row["map_change"] = row["map"] - without["groups"][group]["map"]
    changes = [row["map_change"] for row in result["groups"].values()]
    result["map_change"] = sum(changes) / len(changes)
    return result
