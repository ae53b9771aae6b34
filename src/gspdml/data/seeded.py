"""Per-item augmentation that is reproducible regardless of DataLoader workers and resume.

The random state of item ``index`` in epoch ``epoch`` is a ``torch.Generator`` seeded from
``(seed, epoch, index)`` through numpy's ``SeedSequence`` (which hashes the tuple, so nearby
keys give unrelated streams). Nothing depends on the worker that loads the item or on what was
loaded before it.

The epoch reaches the workers in one of two ways: :meth:`SeededTransformDataset.set_epoch`
before creating the DataLoader iterator (enough with the default ``persistent_workers=False``,
which re-sends the dataset to the workers on every ``iter``), or the sampler yields
``(index, epoch)`` pairs (:class:`~gspdml.data.samplers.ClassBalancedBatchSampler` with
``with_epoch=True``), which also works with persistent workers.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset


def seeded_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """A generator whose stream is a pure function of ``(seed, epoch, index)``."""
    words = np.random.SeedSequence([int(seed), int(epoch), int(index)]).generate_state(2, np.uint32)
    generator = torch.Generator()
    generator.manual_seed((int(words[0]) << 32 | int(words[1])) & ((1 << 63) - 1))
    return generator


class SeededTransformDataset(Dataset):
    """Wrap ``dataset`` (items ``(image, label)``) and apply ``transform(image, generator)``.

    Indices may be ints (the epoch is :attr:`epoch`, set with :meth:`set_epoch`) or
    ``(index, epoch)`` pairs. ``labels``, ``classes``, ``paths``, ``channels`` and ``class_names``
    are those of the wrapped dataset.
    """

    def __init__(self, dataset: Dataset, transform, seed: int = 0):
        self.dataset = dataset
        self.transform = transform
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str):
        if name in ("labels", "classes", "paths", "channels", "class_names"):
            return getattr(self.__dict__["dataset"], name)
        raise AttributeError(name)

    def __getitem__(self, key):
        index, epoch = (key if isinstance(key, tuple) else (key, self.epoch))
        image, label = self.dataset[int(index)]
        return self.transform(image, seeded_generator(self.seed, epoch, index)), label
