"""Random batches (data.sampler: random): permutations per epoch, resumable, trainable."""

import numpy as np
import pytest

from gspdml.config import load_config
from gspdml.data.samplers import RandomBatchSampler
from gspdml.errors import ConfigError


def test_each_epoch_is_a_permutation_cut_into_full_batches():
    labels = np.repeat(np.arange(7), 3)  # 21 items, batches of 5 -> 4 batches, one item dropped
    sampler = RandomBatchSampler(labels, 5, seed=3)
    assert len(sampler) == 4 and sampler.batch_size == 5
    epochs = [list(sampler), list(sampler)]
    for batches in epochs:
        flat = np.concatenate(batches)
        assert all(len(b) == 5 for b in batches) and len(set(flat.tolist())) == 20
    assert epochs[0] != epochs[1]
    assert list(RandomBatchSampler(labels, 5, seed=3)) == epochs[0]  # a function of (seed, epoch)


def test_random_batches_contain_singleton_classes_and_resume_exactly():
    labels = np.repeat(np.arange(50), 4)
    sampler = RandomBatchSampler(labels, 20, seed=0)
    first = next(iter(sampler))
    _, counts = np.unique(labels[first], return_counts=True)
    assert (counts == 1).any()  # what Metrix's anchor-negative mixing needs
    run = RandomBatchSampler(labels, 20, seed=0)
    run.advance_to(13)  # 10 batches per epoch: epoch 1, position 3
    resumed = RandomBatchSampler(labels, 20, seed=0)
    resumed.load_state_dict(run.state_dict())
    assert (resumed.epoch, resumed.position) == (1, 3)
    assert (
        next(iter(resumed)) == RandomBatchSampler(labels, 20, seed=0).epoch_batches(1)[3].tolist()
    )


def test_ranks_split_each_global_batch():
    labels = np.arange(24)
    whole = RandomBatchSampler(labels, 8, seed=1).epoch_batches(0)
    parts = [
        RandomBatchSampler(labels, 8, seed=1, rank=r, world_size=2).epoch_batches(0) for r in (0, 1)
    ]
    for b, (a0, a1) in enumerate(zip(*parts)):
        assert np.concatenate([a0, a1]).tolist() == whole[b].tolist()


def test_bad_random_sampler_settings_are_named():
    with pytest.raises(ConfigError, match="only 3 items"):
        RandomBatchSampler(np.arange(3), 5)
    with pytest.raises(ConfigError, match=r"data\.halves"):
        load_config({"data": {"sampler": "random", "halves": True, "classes_per_batch": 8}})
    with pytest.raises(ConfigError, match=r"data\.sampler.*allowed: balanced, random"):
        load_config({"data": {"sampler": "uniform"}})
