"""LIBC in the trainer: alone, around GSP + ZSR and inside XML it trains (the objective on a fixed
batch drops); its message passing network is trained with the network but never used to embed
for retrieval (gspdml.losses.libc)."""

import pytest
import torch

from gspdml.config import load_config
from gspdml.models.inference import embed
from gspdml.training import Trainer

LIBC = {"libc": {"num_layers": 1, "num_heads": 2, "temperature": 0.5}}
COMPOSITIONS = {
    "libc": ({}, LIBC),
    "libc+gsp": (
        {"pooling": {"name": "gsp", "num_prototypes": 4, "mu": 0.3, "eps": 5.0}},
        {"name": "zsr", "mixing": 0.1, "base": LIBC},
    ),
    "libc+xml": (
        {"head": "local", "pooling": {"name": "gmp"}},
        {"name": "xml", "num_prototypes": 4, "mixing": 0.01, "base": LIBC},
    ),
}


def libc_trainer(tmp_path, make_config, composition, **sections):
    model, loss = COMPOSITIONS[composition]
    config = load_config(
        make_config(
            model={"embedding_dim": 16, **model},
            loss=loss,
            data={"halves": True},
            optimizer={"name": "radam", "lr": 1e-2},
            **sections,
        )
    )
    return Trainer.from_config(config, tmp_path / "run")


def objective(trainer, images, labels):
    """The training objective on one batch with the same dropout masks each time."""
    torch.manual_seed(0)
    trainer.model.train()
    trainer.loss.train()
    with torch.no_grad():
        return float(trainer.loss.training_objective(trainer.model, images, labels))


@pytest.mark.parametrize("composition", list(COMPOSITIONS))
def test_training_steps_lower_the_objective(tmp_path, make_config, composition):
    trainer = libc_trainer(tmp_path, make_config, composition)
    images, labels = next(iter(trainer._loader()))
    before = objective(trainer, images, labels)
    for _ in range(40):
        trainer._train_step(images, labels)
    after = objective(trainer, images, labels)
    assert after < 0.5 * before, (before, after)


def test_retrieval_embeddings_ignore_the_message_passing_network(tmp_path, make_config):
    trainer = libc_trainer(tmp_path, make_config, "libc+gsp")
    loader = iter(trainer._loader())
    for _ in range(2):
        trainer._train_step(*next(loader))
    images, labels = next(loader)
    trained = objective(trainer, images, labels)  # (a train-mode forward: before embedding)
    dataset = trainer.data.test.query
    before, _ = embed(trainer.model, dataset)
    with torch.no_grad():
        for p in trainer.loss.base.mpn.parameters():
            p.add_(torch.randn_like(p))
    after, _ = embed(trainer.model, dataset)
    # the MPN is not part of the embeddings retrieval uses: they are the backbone's, image by
    # image, with no interaction within the batch ...
    torch.testing.assert_close(after, before, rtol=0, atol=0)
    trainer.model.eval()
    with torch.no_grad():
        single = [trainer.model(dataset[i][0][None]).embedding[0] for i in range(4)]
    torch.testing.assert_close(torch.stack(single), before[:4], rtol=1e-5, atol=1e-6)
    # ... but it is part of the training objective
    assert abs(objective(trainer, images, labels) - trained) > 1e-3
