import math
from collections import Counter

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from gspdml.data.samplers import ClassBalancedBatchSampler
from gspdml.errors import ConfigError

# 9 classes of uneven sizes (one dominant), labels not contiguous and shuffled
SIZES = {0: 4, 2: 5, 3: 7, 5: 9, 6: 3, 7: 12, 8: 30, 11: 6, 12: 8}
LABELS = np.random.default_rng(0).permutation(np.concatenate([[c] * n for c, n in SIZES.items()]))


def epoch(sampler):
    return [list(b) for b in sampler]


def test_batches_are_class_balanced_and_halves_disjoint():
    s = ClassBalancedBatchSampler(LABELS, 4, 3, halves=True, seed=1, replacement=True)
    for batch in epoch(s):
        assert len(batch) == 12
        labels = LABELS[batch]
        assert sorted(Counter(labels).values()) == [3, 3, 3, 3]
        assert not set(labels[:6]) & set(labels[6:])
        # a class is contiguous in the batch: its m samples form one chunk
        assert all(len(set(labels[k : k + 3])) == 1 for k in range(0, 12, 3))


def test_every_sample_each_epoch_and_length():
    s = ClassBalancedBatchSampler(LABELS, 4, 3, seed=2, replacement=True)
    # fewest batches: S chunks over P=4 slots, and the largest class needs one batch per chunk
    chunks = {c: max(1, math.ceil(n / 3)) for c, n in SIZES.items()}
    assert len(s) == max(math.ceil(sum(chunks.values()) / 4), max(chunks.values()))
    for e in range(3):
        batches = epoch(s)
        assert len(batches) == len(s) and s.epoch == e + 1
        assert set(np.concatenate(batches)) == set(range(len(LABELS)))
        for batch in batches:  # no sample twice inside a chunk unless its class is too small
            for k in range(0, len(batch), 3):
                chunk = batch[k : k + 3]
                if SIZES[LABELS[chunk[0]]] >= 3:
                    assert len(set(chunk)) == 3


def test_dominant_class_gets_one_chunk_per_batch():
    labels = np.array([0] * 40 + [1] * 4 + [2] * 4 + [3] * 4)
    s = ClassBalancedBatchSampler(labels, 2, 4, seed=0)
    batches = epoch(s)
    assert len(batches) == 10 == len(s)
    assert all((labels[b] == 0).sum() == 4 for b in batches)
    assert set(np.concatenate(batches)) == set(range(len(labels)))


def test_deterministic_given_seed_and_epoch():
    a = ClassBalancedBatchSampler(LABELS, 4, 3, seed=5, replacement=True)
    b = ClassBalancedBatchSampler(LABELS, 4, 3, seed=5, replacement=True)
    first = epoch(a)
    assert first == epoch(b)
    assert epoch(a) != first  # the next epoch is shuffled differently
    c = ClassBalancedBatchSampler(LABELS, 4, 3, seed=6, replacement=True)
    assert epoch(c) != first
    b.set_epoch(0)
    assert epoch(b) == first


@pytest.mark.parametrize("consumed", [0, 3, 7, 12])
def test_resume_continues_with_the_next_batch(consumed):
    reference = ClassBalancedBatchSampler(LABELS, 4, 3, seed=9, replacement=True)
    stream = epoch(reference) + epoch(reference)
    run = ClassBalancedBatchSampler(LABELS, 4, 3, seed=9, replacement=True)
    taken = []
    while len(taken) < consumed:
        for batch in run:
            taken.append(batch)
            if len(taken) == consumed:
                break
    state = run.state_dict()
    resumed = ClassBalancedBatchSampler(LABELS, 4, 3, seed=9, replacement=True)
    resumed.load_state_dict(state)
    rest = epoch(resumed)
    assert taken + rest == stream[: consumed + len(rest)]
    assert rest and (consumed + len(rest)) % len(reference) == 0
    jumped = ClassBalancedBatchSampler(LABELS, 4, 3, seed=9, replacement=True)
    jumped.advance_to(consumed)
    assert epoch(jumped) == rest


def test_resume_rejects_other_seed():
    s = ClassBalancedBatchSampler(LABELS, 4, 3, seed=1, replacement=True)
    other = ClassBalancedBatchSampler(LABELS, 4, 3, seed=2, replacement=True)
    with pytest.raises(ConfigError, match="seed=1"):
        other.load_state_dict(s.state_dict())


def test_small_class_error_names_class_and_count():
    with pytest.raises(
        ConfigError,
        match=r"data.samples_per_class: class 6 \(shoe\) has 3 samples, fewer than samples_per_class=4",
    ):
        ClassBalancedBatchSampler(LABELS, 4, 4, class_names=dict.fromkeys(SIZES, "shoe"))
    s = ClassBalancedBatchSampler(LABELS, 4, 4, replacement=True)
    batches = epoch(s)
    assert set(np.concatenate(batches)) == set(range(len(LABELS)))
    with pytest.raises(ConfigError, match="only 9 classes"):
        ClassBalancedBatchSampler(LABELS, 10, 2)
    with pytest.raises(ConfigError, match="even"):
        ClassBalancedBatchSampler(LABELS, 3, 2, halves=True)


def test_distributed_slices_form_the_global_batch():
    full = epoch(ClassBalancedBatchSampler(LABELS, 4, 3, seed=4, replacement=True))
    parts = [
        epoch(
            ClassBalancedBatchSampler(LABELS, 4, 3, seed=4, replacement=True, rank=r, world_size=3)
        )
        for r in range(3)
    ]
    assert [sum((p[k] for p in parts), []) for k in range(len(full))] == full
    with pytest.raises(ConfigError, match="world_size"):
        ClassBalancedBatchSampler(LABELS, 4, 3, world_size=5, replacement=True)


def test_works_as_dataloader_batch_sampler():
    data = TensorDataset(torch.arange(len(LABELS)), torch.from_numpy(LABELS))
    s = ClassBalancedBatchSampler(LABELS, 4, 3, seed=3, replacement=True)
    expected = s.epoch_batches(0)
    got = [idx.tolist() for idx, _ in DataLoader(data, batch_sampler=s)]
    assert got == [b.tolist() for b in expected]
    tagged = ClassBalancedBatchSampler(LABELS, 4, 3, seed=3, replacement=True, with_epoch=True)
    first = next(iter(tagged))
    assert first == [(i, 0) for i in expected[0]]
