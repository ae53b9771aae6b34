"""The run's precision is resolved once, at the entry, and passed along: the evaluation service
takes the trainer's ``PrecisionChoice`` as it is, and the embedding loop below it refuses
``auto`` instead of resolving it a second time (:mod:`gspdml.compat.hardware`)."""

import pytest
import torch

from gspdml.compat.hardware import PrecisionChoice
from gspdml.data.base import EvalSplit
from gspdml.errors import ConfigError
from gspdml.evaluation.service import EvalSpec, evaluate
from gspdml.models import build_embedder
from gspdml.models.inference import autocast_context, embed, memory_format


def _tiny():
    torch.manual_seed(0)
    model = build_embedder(
        {"backbone": {"name": "small_cnn", "widths": [4, 8]}, "pooling": {"name": "gap"}},
        in_channels=1,
    )
    items = [(torch.rand(1, 12, 12) + label, label) for label in range(3) for _ in range(4)]
    return model, items


def test_evaluate_takes_the_runs_choice_as_its_name():
    model, items = _tiny()
    spec = EvalSpec(recall_at=(1,))
    options = dict(device="cpu", batch_size=5)
    by_name = evaluate(model, EvalSplit(items), spec, precision="fp32", **options).metrics
    chosen = PrecisionChoice("fp32", "resolved by the run's entry")
    by_choice = evaluate(model, EvalSplit(items), spec, precision=chosen, **options).metrics
    assert by_choice == by_name and 0.0 <= by_name["map_at_r"] <= 1.0


def test_below_the_entry_auto_is_refused_not_resolved_again():
    model, items = _tiny()
    cpu = torch.device("cpu")
    with pytest.raises(ConfigError, match="'auto' is not a resolved precision"):
        embed(model, items, precision="auto")
    with pytest.raises(ConfigError, match="resolve_precision"):
        memory_format("auto", cpu)
    with pytest.raises(ConfigError, match="resolve_precision"):
        autocast_context("auto", cpu)
    assert memory_format(PrecisionChoice("bf16", "given"), cpu) == torch.channels_last
    emb, labels = embed(model, items, precision=PrecisionChoice("fp32", "given"))
    assert emb.shape[0] == len(items) and labels.tolist() == [i // 4 for i in range(12)]


def test_the_search_of_the_metrics_runs_in_the_runs_precision(monkeypatch):
    """The exact kNN behind the metrics gets the run's resolved precision (its candidate pass;
    the neighbours are exact in any precision), not ``auto`` resolved a second time."""
    from gspdml.evaluation import exact_knn

    seen = []
    original = exact_knn.knn

    def recording(*args, **kwargs):
        seen.append(kwargs.get("precision"))
        return original(*args, **kwargs)

    monkeypatch.setattr(exact_knn, "knn", recording)
    model, items = _tiny()
    chosen = PrecisionChoice("fp32", "resolved by the run's entry")
    spec = EvalSpec(recall_at=(1,))
    evaluate(model, EvalSplit(items), spec, precision=chosen, device="cpu", batch_size=5)
    assert seen and all(p == chosen for p in seen)
