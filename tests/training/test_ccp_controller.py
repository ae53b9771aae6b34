"""The CCP controller: initial proxies, projection problems (Algorithm 1-2) and resume, with a tiny fake trainer."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gspdml.errors import TrainingError
from gspdml.losses import build_loss
from gspdml.losses.ccp_selection import sample_pool
from gspdml.training.ccp_controller import CCPController
from gspdml.training.parts import find_callbacks
from tests.helpers.kcenter_reference import kcenter_reference

CLASSES, K, POOL, DIM = 3, 2, 5, 4


class FakeDataset:
    def __init__(self, x, labels):
        self.x, self.labels = x, np.asarray(labels, dtype=np.int64)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], int(self.labels[i])


class FakeTrainer:
    """Exactly the attributes the CCP controller documents: model, optimizer, train_dataset, embed()."""

    def __init__(self, model, loss, dataset):
        self.model, self.loss, self.train_dataset = model, loss, dataset
        self.controller = CCPController(loss)
        self.optimizer = torch.optim.Adam(
            list(model.parameters()) + list(loss.parameters()), lr=1e-2
        )

    def embed(self, dataset):
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            x = torch.stack([dataset[i][0] for i in range(len(dataset))])
            labels = torch.tensor([dataset[i][1] for i in range(len(dataset))])
            emb = F.normalize(self.model(x), dim=1)
        self.model.train(was_training)
        return emb, labels

    def step(self, x, labels):
        self.optimizer.zero_grad()
        self.loss(F.normalize(self.model(x), dim=1), labels).backward()
        self.controller.on_after_backward(self)
        self.optimizer.step()


def _setup(**kwargs):
    torch.manual_seed(0)
    labels = torch.arange(CLASSES).repeat_interleave(8)
    x = torch.randn(len(labels), 6)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, DIM))
    spec = {
        "ccp": {
            "base": {"c2": {"neg_margin": 1.2}},
            "proxies_per_class": K,
            "pool_size": POOL,
            **kwargs,
        }
    }
    loss = build_loss(spec, embedding_dim=DIM, num_classes=CLASSES)
    trainer = FakeTrainer(model, loss, FakeDataset(x, labels))
    return trainer, trainer.controller, x, labels


def test_initial_proxies_are_embeddings_of_their_class():
    trainer, ctl, x, labels = _setup(init="random")
    ctl.on_train_start(trainer)
    emb = trainer.embed(trainer.train_dataset)[0]
    for row, c in enumerate(ctl.ccp.proxy_labels.tolist()):
        dist = (emb - ctl.ccp.proxies[row].detach()).norm(dim=1)
        assert dist.min() < 1e-6 and labels[dist.argmin()] == c
    assert not ctl.lambda_active


def test_projection_ends_after_patience_with_best_snapshot_kcenter_and_fresh_adam_state():
    trainer, ctl, x, labels = _setup()
    ctl.on_train_start(trainer)
    params = lambda: {n: p.detach().clone() for n, p in trainer.model.named_parameters()}  # noqa: E731
    snapshots = []
    for value in [0.1, 0.3, 0.2, 0.25]:
        trainer.step(x, labels)
        trainer.step(x, labels)
        ctl.on_evaluation(trainer, {"map_at_r": value})
        snapshots.append((params(), ctl.ccp.proxies.detach().clone()))
    assert ctl.problems_finished == 0 and not ctl.lambda_active
    assert int(trainer.optimizer.state[ctl.ccp.proxies]["step"]) == 8

    trainer.step(x, labels)
    torch.manual_seed(11)
    pool_idx = sample_pool(trainer.train_dataset.labels, CLASSES, POOL)
    pool_emb = trainer.embed(trainer.train_dataset)[0][pool_idx.reshape(-1)].reshape(
        CLASSES, POOL, DIM
    )
    torch.manual_seed(11)
    ctl.on_evaluation(trainer, {"map_at_r": 0.05})  # third round without improvement

    assert ctl.problems_finished == 1 and ctl.lambda_active
    best_params, best_proxies = snapshots[1]  # the round with 0.3
    for n, p in best_params.items():
        assert torch.equal(ctl.anchor[n], p)
    old = F.normalize(best_proxies, dim=1).reshape(K, CLASSES, DIM)
    for c in range(CLASSES):
        expected = kcenter_reference(pool_emb[c], old[:, c], K)
        for k, i in enumerate(expected):
            torch.testing.assert_close(ctl.ccp.proxies[k * CLASSES + c].detach(), pool_emb[c, i])
    assert ctl.ccp.proxies not in trainer.optimizer.state
    assert int(trainer.optimizer.state[next(trainer.model.parameters())]["step"]) == 9
    trainer.step(x, labels)
    assert int(trainer.optimizer.state[ctl.ccp.proxies]["step"]) == 1


def test_callback_state_round_trip_and_resume_keeps_proxies():
    trainer, ctl, x, labels = _setup()
    ctl.on_train_start(trainer)
    for value in [0.2, 0.1, 0.1, 0.1, 0.3]:
        trainer.step(x, labels)
        ctl.on_evaluation(trainer, {"map_at_r": value})
    state = {k: v.clone() for k, v in ctl.callback_state().items()}
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    fresh = _setup()[1]
    fresh.ccp.load_state_dict(ctl.ccp.state_dict())
    fresh.load_callback_state(state)
    fresh.on_train_start(trainer)  # a resumed run must not re-initialise the proxies
    assert torch.equal(fresh.ccp.proxies, ctl.ccp.proxies)
    assert (fresh.best, fresh.bad, fresh.problems_finished, fresh.lambda_active) == (
        0.3,
        0,
        1,
        True,
    )
    for n, p in ctl.anchor.items():
        assert torch.equal(fresh.anchor[n], p)
    torch.testing.assert_close(fresh.best_proxies, ctl.best_proxies)


def test_missing_metric_is_named():
    trainer, ctl, _, _ = _setup(metric="precision_at_1")
    with pytest.raises(TrainingError, match="precision_at_1"):
        ctl.on_evaluation(trainer, {"map_at_r": 0.1})


def test_ccp_inside_zsr_gets_its_controller():
    """C1+CCP+GSP (thesis Table 5.1) nests CCP in ZSR: the trainer's callbacks hold one CCP
    controller, for the nested loss, by its module path."""
    spec = {"zsr": {"base": {"ccp": {"base": {"c1": {"margin": 0.5}}, "proxies_per_class": K}}}}
    loss = build_loss(spec, embedding_dim=DIM, num_classes=CLASSES)
    found = find_callbacks(nn.Linear(DIM, DIM), loss, {})
    controllers = {name: c for name, c in found.items() if isinstance(c, CCPController)}
    assert list(controllers) == ["ccp:loss.base"] and controllers["ccp:loss.base"].ccp is loss.base
