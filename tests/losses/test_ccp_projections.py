"""CCP proxy selection (Algorithm 2) and the projection controller, with a tiny fake trainer."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gspdml.errors import TrainingError
from gspdml.losses import build_loss
from gspdml.losses.ccp_selection import sample_pool, select_proxies

CLASSES, K, POOL, DIM = 3, 2, 5, 4


class FakeDataset:
    def __init__(self, x, labels):
        self.x, self.labels = x, np.asarray(labels, dtype=np.int64)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], int(self.labels[i])


class FakeTrainer:
    """Exactly the attributes CCP documents: model, optimizer, train_dataset, embed()."""

    def __init__(self, model, loss, dataset):
        self.model, self.loss, self.train_dataset = model, loss, dataset
        self.optimizer = torch.optim.Adam(list(model.parameters()) + list(loss.parameters()), lr=1e-2)

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
        self.loss.on_after_backward(self)
        self.optimizer.step()


def _setup(**kwargs):
    torch.manual_seed(0)
    labels = torch.arange(CLASSES).repeat_interleave(8)
    x = torch.randn(len(labels), 6)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, DIM))
    spec = {"ccp": {"base": {"c2": {"neg_margin": 1.2}}, "proxies_per_class": K, "pool_size": POOL, **kwargs}}
    loss = build_loss(spec, embedding_dim=DIM, num_classes=CLASSES)
    trainer = FakeTrainer(model, loss, FakeDataset(x, labels))
    return trainer, loss, x, labels


def _kcenter_reference(pool, old, k):
    """Algorithm 2 for one class, written as plain loops."""
    centres, picked = [list(map(float, v)) for v in old], []
    for _ in range(k):
        best, best_i = -1.0, None
        for i, u in enumerate(pool.tolist()):
            if i in picked:
                continue
            d = min(math.dist(u, v) for v in centres)
            if d > best:
                best, best_i = d, i
        picked.append(best_i)
        centres.append(pool[best_i].tolist())
    return picked


def test_sample_pool_draws_from_the_right_class_without_replacement():
    labels = np.array([2, 0, 1, 0, 2, 2, 1, 0, 2, 1, 0, 1])
    torch.manual_seed(3)
    pool = sample_pool(labels, 3, 3)
    assert pool.shape == (3, 3)
    for c in range(3):
        assert (labels[pool[c].numpy()] == c).all() and len(set(pool[c].tolist())) == 3
    small = sample_pool(np.array([0, 0, 1]), 2, 4)  # class 1 has one image: padded by repetition
    assert (small[1] == 2).all() and set(small[0].tolist()) == {0, 1}
    with pytest.raises(ValueError, match="class 1"):
        sample_pool(np.array([0, 2]), 3, 1)


def test_select_proxies_is_greedy_k_center_from_old_proxies():
    g = torch.Generator().manual_seed(1)
    pool = torch.randn(4, 7, 3, generator=g, dtype=torch.float64)
    old = torch.randn(4, 3, 3, generator=g, dtype=torch.float64)
    old[:, :2] = pool[:, :2]  # two old proxies sit on pool points: those are never chosen
    picks = select_proxies(pool, old, 3)
    for c in range(4):
        assert picks[c].tolist() == _kcenter_reference(pool[c], old[c], 3)
        assert not set(picks[c].tolist()) & {0, 1}


def test_pool_size_equal_to_k_takes_the_whole_random_pool():
    g = torch.Generator().manual_seed(2)
    pool, old = torch.randn(5, 4, 3, generator=g), torch.randn(5, 4, 3, generator=g)
    picks = select_proxies(pool, old, 4)
    assert all(sorted(p.tolist()) == [0, 1, 2, 3] for p in picks)


def test_initial_proxies_are_embeddings_of_their_class():
    trainer, loss, x, labels = _setup(init="random")
    loss.on_train_start(trainer)
    emb = trainer.embed(trainer.train_dataset)[0]
    for row, c in enumerate(loss.proxy_labels.tolist()):
        dist = (emb - loss.proxies[row].detach()).norm(dim=1)
        assert dist.min() < 1e-6 and labels[dist.argmin()] == c
    assert not loss._lambda_active


def test_projection_ends_after_patience_with_best_snapshot_kcenter_and_fresh_adam_state():
    trainer, loss, x, labels = _setup()
    loss.on_train_start(trainer)
    params = lambda: {n: p.detach().clone() for n, p in trainer.model.named_parameters()}  # noqa: E731
    snapshots = []
    for value in [0.1, 0.3, 0.2, 0.25]:
        trainer.step(x, labels)
        trainer.step(x, labels)
        loss.on_evaluation(trainer, {"map_at_r": value})
        snapshots.append((params(), loss.proxies.detach().clone()))
    assert loss.problems_finished == 0 and not loss._lambda_active
    assert int(trainer.optimizer.state[loss.proxies]["step"]) == 8

    trainer.step(x, labels)
    torch.manual_seed(11)
    pool_idx = sample_pool(trainer.train_dataset.labels, CLASSES, POOL)
    pool_emb = trainer.embed(trainer.train_dataset)[0][pool_idx.reshape(-1)].reshape(CLASSES, POOL, DIM)
    torch.manual_seed(11)
    loss.on_evaluation(trainer, {"map_at_r": 0.05})  # third round without improvement

    assert loss.problems_finished == 1 and loss._lambda_active
    best_params, best_proxies = snapshots[1]  # the round with 0.3
    for n, p in best_params.items():
        assert torch.equal(loss._anchor[n], p)
    old = F.normalize(best_proxies, dim=1).reshape(K, CLASSES, DIM)
    for c in range(CLASSES):
        expected = _kcenter_reference(pool_emb[c], old[:, c], K)
        for k, i in enumerate(expected):
            torch.testing.assert_close(loss.proxies[k * CLASSES + c].detach(), pool_emb[c, i])
    assert loss.proxies not in trainer.optimizer.state
    assert int(trainer.optimizer.state[next(trainer.model.parameters())]["step"]) == 9
    trainer.step(x, labels)
    assert int(trainer.optimizer.state[loss.proxies]["step"]) == 1


def test_callback_state_round_trip_and_resume_keeps_proxies():
    trainer, loss, x, labels = _setup()
    loss.on_train_start(trainer)
    for value in [0.2, 0.1, 0.1, 0.1, 0.3]:
        trainer.step(x, labels)
        loss.on_evaluation(trainer, {"map_at_r": value})
    state = {k: v.clone() for k, v in loss.callback_state().items()}
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    fresh = _setup()[1]
    fresh.load_state_dict(loss.state_dict())
    fresh.load_callback_state(state)
    fresh.on_train_start(trainer)  # a resumed run must not re-initialise the proxies
    assert torch.equal(fresh.proxies, loss.proxies)
    assert (fresh._best, fresh._bad, fresh.problems_finished, fresh._lambda_active) == (0.3, 0, 1, True)
    for n, p in loss._anchor.items():
        assert torch.equal(fresh._anchor[n], p)
    torch.testing.assert_close(fresh._best_proxies, loss._best_proxies)


def test_missing_metric_is_named():
    trainer, loss, _, _ = _setup(metric="precision_at_1")
    with pytest.raises(TrainingError, match="precision_at_1"):
        loss.on_evaluation(trainer, {"map_at_r": 0.1})
