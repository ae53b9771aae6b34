"""Properties every registered loss must have (parametrised over the registry, so a newly
registered loss is tested automatically, as the poolings are in tests/pooling).

Each loss is built from its defaults (a wrapper around ``c2``), then driven through the trainer's
entry point ``training_objective(model, images, labels)`` with a small embedder and a batch
that meets what the loss declares (:class:`~gspdml.losses.requirements.BatchRequirements`):
class-disjoint halves, samples per class, the output fields it reads. The declaration must agree
with the behaviour: a loss that declares halves refuses a batch that has none, a loss that reads
no output field trains on an embedder that gives only the embedding, a loss that reads one fails
without it, and a loss that declares one sample per class learns from such batches.
"""

import pytest
import torch
from torch import nn

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES, build_loss
from gspdml.losses.requirements import model_provides, requirements_of
from gspdml.losses.wrapper import LossWrapper
from gspdml.models import build_embedder
from gspdml.settings.sections import DataConfig
from gspdml.training.parts import CONTROLLERS, TensorEmbedder

NAMES = LOSSES.names()
CLASSES, DIM = 8, 16
GSP = {"name": "gsp", "num_prototypes": 4, "init": "random", "iters": 10}
# XBM switches its memory on from the second step (the default waits 1000 steps)
OPTIONS = {
    "xbm": {"start_step": 0, "memory_batches": 2},
    "cross_batch_memory": {"start_step": 0, "memory_batches": 2},
}


def make_loss(name):
    torch.manual_seed(0)
    spec = {"name": name, **OPTIONS.get(name, {})}
    if issubclass(LOSSES.get(name), LossWrapper) and LOSSES.get(name).base_option == "base":
        spec["base"] = {"name": "c2"}
    return build_loss(spec, embedding_dim=DIM, num_classes=CLASSES).train()


def make_model(reads=frozenset()):
    torch.manual_seed(1)
    pooling = GSP if "attributes" in reads else "gap"
    model = {
        "backbone": {"name": "small_cnn", "widths": [8, 8, 8]},
        "embedding_dim": DIM,
        "pooling": pooling,
        "head": "local",
    }
    return build_embedder(model, 3).train()


def batch(classes, per_class, seed=2, halves=False):
    """Images ``[B, 3, 16, 16]`` and labels: ``per_class`` samples of each class, the first half
    of the classes in the first half of the batch when ``halves``, shuffled within each half."""
    gen = torch.Generator().manual_seed(seed)
    first = torch.tensor(classes[: len(classes) // 2]).repeat_interleave(per_class)
    second = torch.tensor(classes[len(classes) // 2 :]).repeat_interleave(per_class)
    if halves:
        labels = torch.cat(
            [
                first[torch.randperm(len(first), generator=gen)],
                second[torch.randperm(len(second), generator=gen)],
            ]
        )
    else:
        labels = torch.cat([first, second])[torch.randperm(len(first) + len(second), generator=gen)]
    return torch.randn(len(labels), 3, 16, 16, generator=gen), labels


def gradient_norm(*modules):
    return sum(float(p.grad.norm()) for m in modules for p in m.parameters() if p.grad is not None)


@pytest.mark.parametrize("name", NAMES)
def test_finite_loss_and_gradient_on_a_batch_meeting_its_requirements(name):
    loss = make_loss(name)
    needs = requirements_of(loss)
    model = make_model(needs.reads)
    needs.check_output(model_provides(model))
    images, labels = batch([0, 1, 2, 3], max(2, needs.samples_per_class), halves=needs.halves)
    value = loss.training_objective(model, images, labels)
    assert value.dim() == 0 and torch.isfinite(value)
    value.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert gradient_norm(model, loss) > 0


@pytest.mark.parametrize("name", NAMES)
def test_declared_halves_agree_with_an_odd_batch(name):
    """A batch of 7 cannot be two halves: refused by a loss that declares halves, trained on by
    any other."""
    loss = make_loss(name)
    needs = requirements_of(loss)
    model = make_model(needs.reads)
    images, labels = batch([0, 1, 2, 3], 2)
    images, labels = images[:7], labels[:7]
    if needs.halves:
        with pytest.raises(ConfigError, match="data.halves"):
            loss.training_objective(model, images, labels)
        with pytest.raises(ConfigError, match="data.halves"):
            needs.check_batches(DataConfig(halves=False, sampler="balanced", samples_per_class=4))
    else:
        assert torch.isfinite(loss.training_objective(model, images, labels))


@pytest.mark.parametrize("name", NAMES)
def test_declared_reads_agree_with_an_embedding_only_model(name):
    """An embedder that gives only the embedding (a user's) trains every loss that reads nothing
    else; a loss that reads more is refused by the declaration check and fails on its own."""
    loss = make_loss(name)
    needs = requirements_of(loss)
    model = TensorEmbedder(nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, DIM)))
    images, labels = batch([0, 1, 2, 3], max(2, needs.samples_per_class), halves=needs.halves)
    if not needs.reads:
        assert torch.isfinite(loss.training_objective(model, images, labels))
        return
    with pytest.raises(ConfigError, match="model.pooling: the loss reads"):
        needs.check_output(model_provides(model))
    with pytest.raises((ConfigError, AttributeError)):
        loss.training_objective(model, images, labels)


@pytest.mark.parametrize("name", NAMES)
def test_one_sample_per_class_is_declared_only_by_losses_that_learn_from_it(name):
    """Two steps of batches with one sample of each class: a loss that declares one sample per
    class enough gets a gradient at the second step (a proxy, or a memory of the first batch)."""
    loss = make_loss(name)
    needs = requirements_of(loss)
    if needs.samples_per_class > 1:
        with pytest.raises(ConfigError, match="data.samples_per_class"):
            needs.check_batches(
                DataConfig(halves=needs.halves, sampler="balanced", samples_per_class=1)
            )
        return
    model = make_model(needs.reads)
    for seed in (3, 4):
        model.zero_grad()
        loss.zero_grad()
        images, labels = batch(list(range(CLASSES)), 1, seed=seed, halves=needs.halves)
        loss.training_objective(model, images, labels).backward()
    assert gradient_norm(model) > 0


@pytest.mark.parametrize("name", NAMES)
def test_a_declared_controller_is_one_the_trainer_knows(name):
    loss = make_loss(name)
    for module in loss.modules():
        assert getattr(module, "controller", None) in (None, *CONTROLLERS)
