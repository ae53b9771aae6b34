"""End-to-end check of FreeDom, WeiCom, the baselines and both AP variants against the reference
table of an independent numpy implementation (tests/helpers/cir_sandbox.py)."""

import numpy as np
import pytest
import torch

from gspdml.cir.baselines import baseline_scores
from gspdml.cir.freedom import FreeDom, TextMemory
from gspdml.cir.ranking import ranking_metrics
from gspdml.cir.weicom import weicom_scores
from tests.helpers.cir_sandbox import build_sandbox

# method -> (standard AP, trapezoid AP) in %, for NOISE = 0.10 and 0.35.
REFERENCE = {
    0.10: {
        "text": (14.31, 13.35),
        "image": (8.11, 7.65),
        "product": (99.21, 99.19),
        "sum": (94.18, 93.88),
        "weicom": (99.28, 99.26),
        "freedom": (93.34, 93.14),
    },
    0.35: {
        "text": (11.80, 10.71),
        "image": (5.19, 4.60),
        "product": (18.82, 17.33),
        "sum": (18.11, 16.25),
        "weicom": (21.24, 19.69),
        "freedom": (23.42, 21.87),
    },
}


@pytest.mark.parametrize("noise", sorted(REFERENCE))
def test_sandbox_reproduces_reference_table(noise):
    box = build_sandbox(noise)
    pairs = box.pairs()
    query_index = torch.tensor([q for q, _ in pairs])
    targets = [box.domain_words[t] for _, t in pairs]
    image_queries = box.images[query_index]
    text_queries = box.encode_text(targets)
    relevant = torch.from_numpy(
        np.stack([(box.classes == box.classes[q]) & (box.domains == t) for q, t in pairs])
    )

    scores = {
        name: baseline_scores(name, image_queries, text_queries, box.images)
        for name in ("text", "image", "product", "sum")
    }
    scores["weicom"] = weicom_scores(image_queries, text_queries, box.images, lam=0.5)
    memory = TextMemory(list(box.vocabulary), box.encode_text(list(box.vocabulary)))
    freedom = FreeDom(box.encode_text, memory, box.images, k=20, n=7, m=7)
    scores["freedom"] = freedom.scores(image_queries, targets, box.images)

    for name, (standard, trapezoid) in REFERENCE[noise].items():
        metrics = ranking_metrics(scores[name], relevant)
        got_standard = 100 * metrics["ap_standard"].mean().item()
        got_trapezoid = 100 * metrics["ap_trapezoid"].mean().item()
        assert got_standard == pytest.approx(standard, abs=0.01), name
        assert got_trapezoid == pytest.approx(trapezoid, abs=0.01), name
