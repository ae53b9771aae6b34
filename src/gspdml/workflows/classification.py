"""Supervised image classification: a backbone, a pooling and a linear classifier trained with
cross-entropy, then top-1 on the test split (Psomas thesis §3.4.1: the supervised training of
Table 3.12 and the fine-tuning of Table 3.4).

    logits = W pool(backbone(x)) + b,      loss = -log softmax(logits)_y

The pooling is any registered one (SimPool with the options of its ablation included); a
released SimPool model brings its own backbone and pooling and is fine-tuned whole. The recipe
(:class:`ClassificationRecipe`) is the optimiser (SGD with momentum or AdamW), the learning rate
per step (linear warm-up from 0, then a cosine decay to 0 over the remaining steps) and the
number of epochs; the image transforms are the caller's.

A run lives in one folder: ``checkpoint.safetensors`` holds the model, the optimiser and the
epochs done (written atomically after every epoch, :func:`gspdml.training.checkpoint.save_state`,
with ``settings`` beside them); a run started again in the folder resumes after the last epoch
written when its ``settings`` are the same, and refuses otherwise. A non-finite loss stops the
run with a :class:`~gspdml.errors.TrainingError`, the last finished epoch kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn
from torch.utils.data import DataLoader

from gspdml.data.base import LabelledDataset
from gspdml.errors import ConfigError, TrainingError
from gspdml.evaluation.top1 import top1_accuracy
from gspdml.output_files import json_text
from gspdml.progress import Progress
from gspdml.training.checkpoint import load_state, save_state

OPTIMIZERS = ("sgd", "adamw")
CHECKPOINT = "checkpoint.safetensors"


@dataclass(frozen=True)
class ClassificationRecipe:
    """How a classifier trains: ``epochs`` of ``batch_size`` images (the last partial batch
    dropped), ``optimizer`` (:data:`OPTIMIZERS`; SGD with ``momentum``, Nesterov off) at peak
    learning rate ``lr`` with ``weight_decay`` on every parameter, ``warmup_epochs`` of linear
    warm-up, then cosine decay to 0; ``label_smoothing`` of the cross-entropy."""

    epochs: int
    batch_size: int
    optimizer: str
    lr: float
    weight_decay: float
    momentum: float = 0.9
    warmup_epochs: int = 0
    label_smoothing: float = 0.0

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.epochs < 1 or self.batch_size < 1 or not self.lr > 0:
            raise ValueError(f"epochs, batch_size and lr must be positive: {self}")

    def describe(self) -> str:
        optimiser = f"SGD m={self.momentum:g}" if self.optimizer == "sgd" else "AdamW"
        warm = f", {self.warmup_epochs} warm-up" if self.warmup_epochs else ""
        return (
            f"{self.epochs} ep x {self.batch_size}, {optimiser} lr {self.lr:g} wd "
            f"{self.weight_decay:g}, cosine{warm}"
        )


def learning_rate(recipe: ClassificationRecipe, step: int, steps_per_epoch: int) -> float:
    """The learning rate of optimiser step ``step`` (0-based): ``lr (step + 1) / W`` during the
    ``W = warmup_epochs x steps_per_epoch`` warm-up steps, then
    ``lr (1 + cos(pi (step - W) / (T - W))) / 2`` with ``T`` the steps of all epochs."""
    total, warmup = recipe.epochs * steps_per_epoch, recipe.warmup_epochs * steps_per_epoch
    if step < warmup:
        return recipe.lr * (step + 1) / warmup
    return recipe.lr * 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


class Classifier(nn.Module):
    """``fc(norm(pooling(backbone(x)).vector))``: ``norm`` the pooled vector's LayerNorm where
    the model has one (the DINO SimPool ViT), else the identity. ``max_logits``: the pooling
    gives ``k`` vectors (its ``vectors(maps)``, ``[B, k, d]``) and the logit of class ``c`` is
    ``max_j fc(u_j)_c`` (Psomas thesis Table 3.12, "k (max)")."""

    def __init__(
        self,
        backbone: nn.Module,
        pooling: nn.Module,
        width: int,
        num_classes: int,
        pooled_norm: Optional[nn.Module] = None,
        max_logits: bool = False,
    ):
        super().__init__()
        if max_logits and not callable(getattr(pooling, "vectors", None)):
            raise ConfigError(
                "pooling", f"{type(pooling).__name__} gives one vector; max_logits needs k vectors"
            )
        self.backbone, self.pooling, self.max_logits = backbone, pooling, max_logits
        self.pooled_norm = pooled_norm if pooled_norm is not None else nn.Identity()
        self.fc = nn.Linear(width, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        maps = self.backbone(images)
        if self.max_logits:
            vectors = self.pooling.vectors(maps)  # type: ignore[operator]
            return self.fc(self.pooled_norm(vectors)).amax(dim=1)  # type: ignore[no-any-return]
        return self.fc(self.pooled_norm(self.pooling(maps).vector))  # type: ignore[no-any-return]


def _optimizer(model: nn.Module, recipe: ClassificationRecipe) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay
        )
    return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)


def _resume(
    path: Path, settings: Mapping[str, Any], model: nn.Module, optimizer: torch.optim.Optimizer
) -> int:
    """The epochs done by the run in ``path`` (0: none), its weights and optimiser state loaded;
    a ConfigError when the folder holds a run of other settings."""
    if not path.is_file():
        return 0
    state, meta = load_state(path)
    if meta.get("settings") != dict(settings):
        raise ConfigError(
            "output_dir",
            f"{path} is a classification run of other settings ({meta.get('settings')}); remove "
            "it or choose another output folder",
        )
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return int(state["epochs"])


def train_classifier(
    model: Classifier,
    train: LabelledDataset,
    test: LabelledDataset,
    recipe: ClassificationRecipe,
    run_dir: Path,
    settings: Mapping[str, Any],
    *,
    device: str = "cpu",
    seed: int = 0,
    workers: int = 0,
) -> float:
    """Train ``model`` on ``train`` by ``recipe`` (module doc), resuming the run of ``run_dir``,
    and return its top-1 accuracy (a fraction) on ``test``. ``settings``: everything that
    decides the result, stored with the checkpoint."""
    steps_per_epoch = len(train) // recipe.batch_size
    if steps_per_epoch < 1:
        raise ConfigError(
            "batch_size",
            f"{recipe.batch_size} is more than the {len(train)} training images; give "
            "batch_size=N with N at most that",
        )
    # as stored: JSON (tuples read back as lists)
    settings = json.loads(json_text({**settings, "recipe": asdict(recipe), "seed": seed}))
    model.to(device)
    optimizer = _optimizer(model, recipe)
    path = run_dir / CHECKPOINT
    done = _resume(path, settings, model, optimizer)
    loss_of = nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing)
    total = recipe.epochs * steps_per_epoch
    progress = Progress(f"training {run_dir.name}", total, "steps")
    progress.update(done * steps_per_epoch)
    for epoch in range(done, recipe.epochs):
        getattr(train, "set_epoch", lambda _: None)(epoch)
        order = torch.Generator().manual_seed(seed * 100003 + epoch)
        loader = DataLoader(
            train,
            batch_size=recipe.batch_size,
            shuffle=True,
            generator=order,
            drop_last=True,
            num_workers=workers,
        )
        model.train()
        for i, (images, labels) in enumerate(loader):
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(recipe, epoch * steps_per_epoch + i, steps_per_epoch)
            loss = loss_of(model(images.to(device)), labels.to(device))
            if not torch.isfinite(loss):
                raise TrainingError(
                    f"{run_dir}: the loss is {loss.item()} at epoch {epoch + 1}, step {i + 1}; "
                    f"{path.name} holds the last finished epoch ({epoch}); lower the learning rate"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            progress.update(note=f"loss {loss.item():.4g}")
        run_dir.mkdir(parents=True, exist_ok=True)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        save_state(path, {**state, "epochs": epoch + 1}, {"settings": settings})
    progress.close()
    model.eval()
    batches = DataLoader(test, batch_size=recipe.batch_size, num_workers=workers)
    return top1_accuracy(lambda images: model(images.to(device)), batches)
