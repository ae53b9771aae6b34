"""experiments/synthetic_tokens and gspdml.analysis.synthetic_tokens (GSP paper §5.1 and
supplement §2.1; Gürbüz thesis §5.3.1)."""

import argparse
import json
import math
import sys
from pathlib import Path

import pytest
import torch

from gspdml.analysis.synthetic_tokens import TokenVocabulary, sample_token_bags
from gspdml.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.synthetic_tokens import run as synthetic  # noqa: E402


def test_bags_follow_the_sampling_recipe():
    vocab = TokenVocabulary()
    assert vocab.size == 68
    labels = torch.arange(16).repeat_interleave(250)
    bags = sample_token_bags(vocab, labels, generator=torch.Generator().manual_seed(0))
    assert bags.tokens.shape == (4000, 50) and bags.foreground.shape == (4000, 50)
    owner = vocab.token_class(bags.tokens)
    # class tokens belong to the bag's class, the others are shared ones (indices 64..67)
    assert torch.equal(owner[bags.foreground], labels[:, None].expand(-1, 50)[bags.foreground])
    assert bool((bags.tokens[~bags.foreground] >= 64).all()) and bool(
        (owner[~bags.foreground] == -1).all()
    )
    # class-token ratio ~ N(0.5, 0.1), rounded to 1/50 (GSP paper supplement §2.1)
    ratio = bags.foreground.float().mean(1)
    assert abs(float(ratio.mean()) - 0.5) < 0.01 and abs(float(ratio.std()) - 0.1) < 0.01
    counts = bags.foreground.sum(1)
    assert int(counts.min()) >= 1 and int(counts.max()) <= 49
    # every class token is drawn (uniformly, with replacement)
    drawn = torch.bincount(bags.tokens.reshape(-1), minlength=68).float()
    per_class = drawn[:64].reshape(16, 4)
    assert float((per_class / per_class.mean(1, keepdim=True) - 1).abs().max()) < 0.1


def test_bag_errors_name_the_problem():
    with pytest.raises(ConfigError, match="labels"):
        sample_token_bags(TokenVocabulary(), torch.tensor([16]))
    with pytest.raises(ConfigError, match="bag_size"):
        sample_token_bags(TokenVocabulary(), torch.tensor([0]), bag_size=1)


def test_smoke_run(tmp_path):
    results = synthetic.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert set(saved["per_seed"]) == {"gap", "gsp"}
    for pooling in ("gap", "gsp"):
        (row,) = saved["per_seed"][pooling]
        for key in ("map_at_r", "precision_at_1", "class_token_weight"):
            assert math.isfinite(row[key]) and 0.0 <= row[key] <= 1.0
    # GAP spreads its weight uniformly, so the weight on class tokens is their ratio
    gap = saved["per_seed"]["gap"][0]
    assert gap["class_token_weight"] == pytest.approx(gap["class_token_ratio"], abs=1e-6)
    assert "gsp_minus_gap_map_at_r" in results["summary"]


def test_tokens_and_prototypes_are_clamped(tmp_path):
    args = _args(prototypes=8, iters=10, init="random")
    model = synthetic.TokenModel("gsp", TokenVocabulary(), 2, args)
    with torch.no_grad():
        model.tokens.mul_(10.0)
        model.pooling.prototypes.add_(1.0)
    model.clamp_()
    for p in (model.tokens, model.pooling.prototypes):
        assert (
            float(p.detach().abs().max()) <= synthetic.TOKEN_RANGE + 1e-7
        )  # float32 rounding of 0.3
    vectors, weights = model(torch.randint(68, (5, 50), generator=torch.Generator().manual_seed(0)))
    assert vectors.shape == (5, 2) and weights.shape == (5, 50)
    assert float(weights.detach().min()) >= 0.0  # (10 iterations: the sum is only approximately 1)


def _args(**kw):
    base = dict(
        prototypes=4,
        mu=0.3,
        eps=10.0,
        iters=20,
        init="kcenter",
        memory=8,
        warmup_steps=2,
        shared="trainable",
    )
    return argparse.Namespace(**{**base, **kw})


def test_fixed_shared_tokens_do_not_move_and_gsp_starts_with_a_gap_warm_up():
    vocab = TokenVocabulary()
    bags = sample_token_bags(
        vocab, torch.arange(16).repeat_interleave(2), generator=torch.Generator().manual_seed(0)
    )
    for shared in ("fixed", "trainable"):
        torch.manual_seed(0)
        model = synthetic.TokenModel("gsp", vocab, 2, _args(shared=shared))
        before = model.tokens.detach().clone()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(4):
            vectors, weights = model(bags.tokens)
            if step < 2:  # the warm-up pools by averaging, as in the authors' token_embedding.py
                torch.testing.assert_close(vectors, model.tokens[bags.tokens].mean(1))
            optimizer.zero_grad()
            vectors.pow(2).sum().backward()
            optimizer.step()
        moved = (model.tokens.detach() - before).abs().sum(1) > 0
        assert bool(moved[:64].any())
        assert bool(moved[64:].any()) == (shared == "trainable")
    # after the warm-up the memory (8 GAP vectors) is full and k-center has picked the prototypes
    assert int(model.pooling.memory_filled) == 8
