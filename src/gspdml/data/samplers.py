"""Class-balanced batch sampler: ``classes_per_batch`` classes × ``samples_per_class`` samples.

This is the *m-per-class* sampler of Gürbüz thesis §5.3.4.1 (P classes × 4 images,
e.g. 8 × 4 for the fair protocol, 16 × 4 for the controlled experiments), built so that one
epoch visits every sample:

1. every class's indices are shuffled and cut into *chunks* of ``samples_per_class``; a short
   last chunk is topped up with other samples of the same class (drawn without replacement from
   the rest of the class), and a class smaller than ``samples_per_class`` is either an error or,
   with ``replacement=True``, one chunk drawn with replacement;
2. chunks are grouped into batches of ``classes_per_batch`` chunks of *distinct* classes by
   "largest remaining first" (random tie-break): each batch takes one chunk from each of the
   classes with the most chunks left. This finishes in the fewest batches possible,
   ``B = max(ceil(S / P), K)`` for S chunks in all, K chunks in the largest class and P classes
   per batch, because it keeps ``max(ceil(S'/P), K') <= B - 1`` after every batch;
3. a batch left with fewer than P chunks (only at the end of the epoch) is completed with fresh
   chunks of classes not yet in it.

A batch lists its chunks one after another, so its first ``P/2`` classes and its last ``P/2``
classes are disjoint halves (what ZSR and XML need; ``halves=True`` checks that P is even).
Everything is a function of ``(seed, epoch)``; :meth:`state_dict` stores the epoch and the
position in it so that a resumed run continues with exactly the next batch.

:class:`RandomBatchSampler` is the plain alternative (config ``data.sampler: random``): each epoch
is a random permutation of the training set cut into batches of a fixed size, the last partial
batch dropped. Metrix trains CUB and Cars on such random batches of 100 (Psomas thesis §2.4.1; its
anchor-negative mixing needs examples whose class appears once in the batch).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np
import numpy.typing as npt
from torch.utils.data import Sampler

from gspdml.errors import ConfigError

FIELD = "data"


class EpochBatchSampler(Sampler[list[Any]]):
    """What both batch samplers share: an epoch's batches are a function of ``(seed, epoch)``
    (:meth:`epoch_batches`, implemented by the subclasses, which also set ``seed``,
    ``num_samples``, ``world_size``, ``with_epoch`` and ``_batches_per_epoch``); iteration, the
    position and its saved state are the same."""

    epoch = 0
    position = 0
    seed: int
    num_samples: int
    with_epoch: bool
    _batches_per_epoch: int

    def __len__(self) -> int:
        """Batches per epoch (the same every epoch)."""
        return self._batches_per_epoch

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its first batch."""
        self.epoch, self.position = int(epoch), 0

    def advance_to(self, batches_done: int) -> None:
        """Position the sampler after ``batches_done`` batches counted from epoch 0."""
        self.epoch, self.position = divmod(int(batches_done), len(self))

    def state_dict(self) -> dict[str, int]:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "num_samples": self.num_samples,
            "batches_per_epoch": len(self),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, mine in (
            ("seed", self.seed),
            ("num_samples", self.num_samples),
            ("batches_per_epoch", len(self)),
        ):
            if key in state and int(state[key]) != mine:
                raise ConfigError(
                    f"{FIELD}.sampler",
                    f"saved sampler state has {key}={state[key]}, this sampler has {mine}; resume with the same data and seed",
                )
        epoch, position = int(state["epoch"]), int(state["position"])
        if not 0 <= position <= len(self):
            raise ConfigError(
                f"{FIELD}.sampler", f"saved position {position} is outside [0, {len(self)}]"
            )
        self.epoch, self.position = divmod(epoch * len(self) + position, len(self))

    def __iter__(self) -> Iterator[list[Any]]:
        batches = self.epoch_batches(self.epoch)
        while self.position < len(batches):
            batch = batches[self.position]
            self.position += 1
            yield [(int(i), self.epoch) for i in batch] if self.with_epoch else batch.tolist()
        self.epoch, self.position = self.epoch + 1, 0

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError


class ClassBalancedBatchSampler(EpochBatchSampler):
    """Batch sampler for ``DataLoader(dataset, batch_sampler=...)``.

    Args:
        labels: the label of every item (e.g. ``dataset.labels``).
        classes_per_batch: P, distinct classes per (global) batch.
        samples_per_class: m, samples of each class in a batch.
        halves: require P even, so that a batch's first and second halves are class-disjoint.
        replacement: allow classes with fewer than m samples (their chunk is drawn with
            replacement); otherwise such a class is a :class:`ConfigError` naming it.
        seed: the run's seed; the batches of epoch e depend only on ``(seed, e)``.
        rank, world_size: distributed training: every rank draws the same global batch and keeps
            its contiguous slice ``[rank · n, (rank + 1) · n)`` with ``n = P·m / world_size``.
        with_epoch: yield ``(index, epoch)`` pairs instead of indices (for
            :class:`~gspdml.data.seeded.SeededTransformDataset` with persistent workers).
        class_names: optional names used in error messages.

    After the last batch of an epoch the sampler moves to the next, so ``for batch in loader``
    can simply be repeated. A DataLoader with workers draws batches ahead of the training loop, so
    the position of the *consumed* batches is restored with :meth:`advance_to`.
    """

    def __init__(
        self,
        labels: npt.ArrayLike,
        classes_per_batch: int,
        samples_per_class: int,
        *,
        halves: bool = False,
        replacement: bool = False,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        with_epoch: bool = False,
        class_names: Optional[Sequence[str]] = None,
    ):
        label_array = np.asarray(labels)
        if label_array.ndim != 1 or not np.issubdtype(label_array.dtype, np.integer):
            raise ConfigError(
                f"{FIELD}.labels",
                f"expected a 1-D integer array of labels, got {label_array.dtype} {label_array.shape}",
            )
        if classes_per_batch < 1:
            raise ConfigError(
                f"{FIELD}.classes_per_batch", f"must be >= 1, got {classes_per_batch}"
            )
        if samples_per_class < 1:
            raise ConfigError(
                f"{FIELD}.samples_per_class", f"must be >= 1, got {samples_per_class}"
            )
        if halves and classes_per_batch % 2:
            raise ConfigError(
                f"{FIELD}.classes_per_batch",
                f"halves need an even number of classes per batch, got {classes_per_batch}",
            )
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigError(
                f"{FIELD}.rank",
                f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}",
            )
        if (classes_per_batch * samples_per_class) % world_size:
            raise ConfigError(
                f"{FIELD}.world_size",
                f"batch size {classes_per_batch * samples_per_class} is not divisible by world_size={world_size}",
            )
        self.classes, inverse = np.unique(label_array, return_inverse=True)
        if len(self.classes) < classes_per_batch:
            raise ConfigError(
                f"{FIELD}.classes_per_batch",
                f"{classes_per_batch} classes per batch but the training split has only "
                f"{len(self.classes)} classes; set data.classes_per_batch to at most "
                f"{len(self.classes)} (or auto), or give the training split more classes "
                "(for an image folder: a smaller data.dataset.test_fraction or val_fraction)",
            )
        order = np.argsort(inverse, kind="stable")
        counts = np.bincount(inverse, minlength=len(self.classes))
        self.members = np.split(order, np.cumsum(counts)[:-1])
        small = np.flatnonzero(counts < samples_per_class)
        if len(small) and not replacement:
            c = small[0]
            name = f" ({class_names[self.classes[c]]})" if class_names is not None else ""
            raise ConfigError(
                f"{FIELD}.samples_per_class",
                f"class {self.classes[c]}{name} has {counts[c]} samples, fewer than samples_per_class={samples_per_class}"
                f" ({len(small)} such classes); lower samples_per_class, remove those classes, or sample with replacement",
            )
        self.classes_per_batch = int(classes_per_batch)
        self.samples_per_class = int(samples_per_class)
        self.halves, self.seed = bool(halves), int(seed)
        self.rank, self.world_size = int(rank), int(world_size)
        self.with_epoch, self.num_samples = bool(with_epoch), len(label_array)
        chunks = np.maximum(1, -(-counts // samples_per_class))
        self._batches_per_epoch = int(max(-(-chunks.sum() // classes_per_batch), chunks.max()))

    @property
    def batch_size(self) -> int:
        """Items per batch on this rank."""
        return self.classes_per_batch * self.samples_per_class // self.world_size

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of ``epoch`` (this rank's slices), as index arrays."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, int(epoch), 0x5A3B1E]))
        m, p = self.samples_per_class, self.classes_per_batch
        queues = [self._chunks(members, rng) for members in self.members]
        remaining = np.array([len(q) for q in queues])
        batches = []
        while remaining.sum():
            # largest remaining first; the random key breaks ties
            order = np.lexsort((rng.random(len(remaining)), -remaining))
            chosen = [c for c in order[:p] if remaining[c]]
            parts = [queues[c][len(queues[c]) - remaining[c]] for c in chosen]
            remaining[chosen] -= 1
            if len(chosen) < p:
                others = np.setdiff1d(np.arange(len(self.members)), chosen)
                for c in rng.choice(others, size=p - len(chosen), replace=False):
                    members = self.members[c]
                    parts.append(rng.choice(members, size=m, replace=len(members) < m))
            batches.append(np.concatenate([parts[j] for j in rng.permutation(len(parts))]))
        n = p * m // self.world_size
        return [b[self.rank * n : (self.rank + 1) * n] for b in batches]

    def _chunks(self, members: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
        """Shuffle one class and cut it into chunks of m, topping up the last chunk."""
        m = self.samples_per_class
        if len(members) < m:
            return [rng.choice(members, size=m, replace=True)]
        shuffled = rng.permutation(members)
        chunks = [shuffled[i : i + m] for i in range(0, len(shuffled), m)]
        short = m - len(chunks[-1])
        if short:
            rest = shuffled[: len(shuffled) - len(chunks[-1])]
            chunks[-1] = np.concatenate([chunks[-1], rng.choice(rest, size=short, replace=False)])
        return chunks


class RandomBatchSampler(EpochBatchSampler):
    """Random batches (module docstring), with the interface of
    :class:`ClassBalancedBatchSampler`."""

    def __init__(
        self,
        labels: npt.ArrayLike,
        batch_size: int,
        *,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        with_epoch: bool = False,
    ):
        items = len(np.asarray(labels))
        if batch_size < 1:
            raise ConfigError(
                f"{FIELD}.classes_per_batch",
                f"random batches need a batch size >= 1, got {batch_size}",
            )
        if batch_size > items:
            raise ConfigError(
                f"{FIELD}.classes_per_batch",
                f"random batches of {batch_size} but the training set has only {items} items",
            )
        if world_size < 1 or not 0 <= rank < world_size or batch_size % world_size:
            raise ConfigError(
                f"{FIELD}.world_size",
                f"batch size {batch_size} over world_size={world_size} (rank {rank}) does not divide",
            )
        self.global_batch, self.seed = int(batch_size), int(seed)
        self.rank, self.world_size = int(rank), int(world_size)
        self.with_epoch, self.num_samples = bool(with_epoch), items
        self._batches_per_epoch = items // self.global_batch

    @property
    def batch_size(self) -> int:
        """Items per batch on this rank."""
        return self.global_batch // self.world_size

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, int(epoch), 0x7A11D0]))
        order = rng.permutation(self.num_samples)[: len(self) * self.global_batch]
        n = self.batch_size
        return [
            b[self.rank * n : (self.rank + 1) * n]
            for b in order.reshape(len(self), self.global_batch)
        ]
