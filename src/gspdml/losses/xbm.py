"""Cross-batch memory (XBM; Wang et al. 2020, CVPR) around any pair loss.

Used with C1 and C2 in Gürbüz thesis §3.3.2.1 (XBM hyper-parameters): memory of (3, 25) batches on CUB/Cars, (100, 400)
on In-shop, (400, 1400) on SOP; the memory loss is switched on after 1K steps ("slow drift").
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import torch
from torch import Tensor

from gspdml.losses.base import LOSSES, Output
from gspdml.losses.pairs import PairLoss
from gspdml.losses.requirements import BatchRequirements
from gspdml.losses.wrapper import LossWrapper
from gspdml.typecheck import AT_LEAST_1, NON_NEGATIVE


@LOSSES.register("xbm", "cross_batch_memory")
class CrossBatchMemory(LossWrapper):
    """``L = L_base(batch, batch) + memory_weight * L_base(batch, memory)`` (XBM official code).

    The memory is a ring buffer of ``memory_batches x B`` detached embeddings and labels, sized
    from the first training batch. The batch is written **before** the loss, so the memory term
    sees it too; each anchor's own copy is removed by index (``reference_self``). When the memory
    term starts (training steps of this module, 0-based) depends on ``fill_before_start``:

    * ``true`` (default; the GSP/CCP authors' TF ``xbm`` loss): every step enqueues, and the term
      is on from step ``start_step + memory_batches - 1``, when the memory is full.
    * ``false`` (the XBM authors' PyTorch code, ``START_ITERATION``): from ``start_step`` on each
      step enqueues and reads the memory, which fills over the next ``memory_batches`` steps.

    In evaluation mode the memory is neither read nor written. Memory, labels, pointer, fill
    level and step are buffers, kept by checkpoints. Each term is reduced as the base pair loss
    does. (``memory_weight`` is not ``weight``: in a loss list that weighs the whole XBM term.)

    Args:
        base: the pair loss applied to the batch and to the memory (a pair loss spec).
        memory_batches: the memory holds this many batches.
        memory_weight: weight of the memory term.
        start_step: the step from which the memory is read (above).
        fill_before_start: enqueue from step 0 so the memory is full when first read (above).
    """

    memory: Tensor
    memory_labels: Tensor
    pointer: Tensor
    filled: Tensor
    step: Tensor

    base_kind = (PairLoss, "a pair loss (c1, c2, triplet, ms, ...)")

    def __init__(
        self,
        base: Any,
        memory_batches: Annotated[int, AT_LEAST_1] = 25,
        memory_weight: float = 1.0,
        start_step: Annotated[int, NON_NEGATIVE] = 1000,
        fill_before_start: bool = True,
        embedding_dim: Optional[int] = None,
        num_classes: Optional[int] = None,
    ) -> None:
        super().__init__(base, embedding_dim, num_classes)
        self.memory_batches, self.start_step = int(memory_batches), int(start_step)
        self.memory_weight, self.fill_before_start = float(memory_weight), bool(fill_before_start)
        self.register_buffer("memory", torch.zeros(0, 0))
        self.register_buffer("memory_labels", torch.zeros(0, dtype=torch.long))
        self.register_buffer("pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))
        self.register_buffer("step", torch.zeros((), dtype=torch.long))

    def batch_requirements(self) -> BatchRequirements:
        """The base loss's, except that the memory brings positives: one sample per class does."""
        return super().batch_requirements().with_memory()

    @property
    def active(self) -> bool:
        """Whether the memory term is on at the current step (see the class docstring)."""
        delay = self.memory_batches - 1 if self.fill_before_start else 0
        return int(self.step) >= self.start_step + delay

    @property
    def enqueues(self) -> bool:
        """Whether the current training step writes the batch into the memory."""
        return self.fill_before_start or int(self.step) >= self.start_step

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        loss: Tensor = self.base(embeddings, labels, output)
        if not self.training:
            return loss
        slots = self.enqueue(embeddings, labels) if self.enqueues else None
        if self.active:
            filled = int(self.filled)
            loss = loss + self.memory_weight * self.base(
                embeddings,
                labels,
                output,
                reference=self.memory[:filled],
                reference_labels=self.memory_labels[:filled],
                reference_self=slots,
            )
        self.step += 1
        return loss

    @torch.no_grad()
    def enqueue(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """Write the batch at the pointer (wrapping around); returns the slot of each row."""
        batch = len(embeddings)
        if self.memory.numel() == 0:
            dtype = torch.promote_types(embeddings.dtype, torch.float32)
            size = self.memory_batches * batch
            self._allocate(size, embeddings.shape[1], embeddings.device, dtype)
        size = len(self.memory)
        if batch > size:
            raise ValueError(f"xbm: batch of {batch} does not fit a memory of {size} rows")
        slots = (self.pointer + torch.arange(batch, device=self.memory.device)) % size
        self.memory[slots] = embeddings.detach().to(self.memory.dtype)
        self.memory_labels[slots] = labels.to(self.memory.device)
        self.pointer.copy_((self.pointer + batch) % size)
        self.filled.copy_(torch.clamp(self.filled + batch, max=size))
        return slots

    def _allocate(self, size: int, dim: int, device: torch.device, dtype: torch.dtype) -> None:
        self.memory = torch.zeros(size, dim, device=device, dtype=dtype)
        self.memory_labels = torch.zeros(size, dtype=torch.long, device=device)

    def _load_from_state_dict(
        self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        """Size the lazily allocated memory from the checkpoint before loading it."""
        stored = state_dict.get(prefix + "memory")
        if stored is not None and stored.shape != self.memory.shape:
            self._allocate(stored.shape[0], stored.shape[1], self.memory.device, stored.dtype)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
