"""The synthetic composed-retrieval sandbox (FreeDom, WeiCom and the baselines of Psomas
thesis chapters 4-5), built with a fixed numpy RNG call order, so its reference mAP table applies.

A mock CLIP: class, domain and distractor-word vectors in R^64; the text encoder is
g(str) = l2(sum of its token vectors); an image is l2(c_class + d_domain + NOISE * eps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def _l2(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@dataclass
class Sandbox:
    images: torch.Tensor  # [800, 64] float64, database = queries = visual memory
    classes: np.ndarray  # [800]
    domains: np.ndarray  # [800]
    domain_words: list
    vocabulary: list  # 10 class words + 200 distractors
    tokens: dict

    def encode_text(self, texts):
        rows = [_l2(np.sum([self.tokens[t] for t in text.split(" ")], axis=0)) for text in texts]
        return torch.from_numpy(np.stack(rows))

    def pairs(self):
        """(query index, target domain index) for every query and every other domain."""
        return [
            (q, t)
            for q in range(len(self.classes))
            for t in range(len(self.domain_words))
            if t != self.domains[q]
        ]


def build_sandbox(noise: float) -> Sandbox:
    rng = np.random.default_rng(0)
    d, C, D, per = 64, 10, 4, 20
    cls_vec = _l2(rng.standard_normal((C, d)))
    dom_vec = _l2(rng.standard_normal((D, d)))
    distr_vec = _l2(rng.standard_normal((200, d)))
    class_words = [f"class{k}" for k in range(C)]
    domain_words = [f"domain{j}" for j in range(D)]
    distr_words = [f"word{i}" for i in range(200)]
    tokens = {
        **dict(zip(class_words, cls_vec)),
        **dict(zip(domain_words, dom_vec)),
        **dict(zip(distr_words, distr_vec)),
    }
    images, classes, domains = [], [], []
    for k in range(C):
        for j in range(D):
            for _ in range(per):
                images.append(_l2(cls_vec[k] + dom_vec[j] + noise * rng.standard_normal(d)))
                classes.append(k)
                domains.append(j)
    return Sandbox(
        torch.from_numpy(np.array(images)),
        np.array(classes),
        np.array(domains),
        domain_words,
        class_words + distr_words,
        tokens,
    )
