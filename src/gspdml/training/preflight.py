"""The checks a trainer runs once, before step 1, on its parts and config; each reads a
declaration (:class:`~gspdml.losses.requirements.BatchRequirements`,
:class:`~gspdml.pooling.base.LazyInitialised`, :class:`~gspdml.data.seeded.TrainingDataset`),
never a type."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch import nn

from gspdml.data.base import DataSplits, EvalSplit
from gspdml.data.summary import ranking_problem, scorable_queries
from gspdml.errors import ConfigError, DataError
from gspdml.losses.requirements import model_provides, requirements_of
from gspdml.models.freezable import Freezable
from gspdml.pooling.base import LazyInitialised
from gspdml.settings.sections import DataConfig, RunConfig
from gspdml.training.reload import check_reloadable
from gspdml.training.rng import rng_state, set_rng_state

ADAPTER = (
    "wrap a plain (image, label) dataset in "
    "gspdml.data.seeded.SeededTransformDataset(dataset, seed=...)"
)


def check_parts(
    model: nn.Module, loss: nn.Module, data: DataSplits, eval_split: EvalSplit, config: RunConfig
) -> bool:
    """Everything the parts declare, against the config, once before step 1; returns whether
    validation rounds can select a model (:func:`check_selection_split`)."""
    check_splits_score(eval_split, data.test, config.evaluation.split)
    selects = check_selection_split(eval_split, config)
    check_reloadable(model, config)
    check_loss_declarations(loss, model, config.data)
    check_warmup(model, config.schedule.warmup_steps)
    check_training_dataset(data.train)
    return selects


def check_splits_score(eval_split: EvalSplit, test: Optional[EvalSplit], split: str) -> None:
    """The evaluation and test splits each have a query to score (else their metrics are
    undefined: refused now, not NaN after training)."""
    for name, part in {split: eval_split, "test": test}.items():
        if part is not None and scorable_queries(part) == 0:
            raise ConfigError(
                "evaluation.split" if name == split else "data.dataset",
                f"the {name} split has no query to score: no query has another image of its "
                f"class ({len(part.query)} queries, every class one image), so its retrieval "
                "metrics are undefined. Give its classes at least two images each",
            )


def check_selection_split(eval_split: EvalSplit, config: RunConfig) -> bool:
    """Whether validation rounds can select a model: a split that cannot rank is refused when
    the config selects by it (restore_best, patience, plateau)."""
    ev = config.evaluation
    problem = ranking_problem(eval_split)
    if problem is None:
        return True
    if ev.restore_best or ev.patience or config.schedule.plateau:
        raise ConfigError(
            "evaluation.split",
            f"the {ev.split} split cannot select a model: {problem}. Give it more classes "
            "(data.dataset.val_fraction, data.dataset.val_classes, or a val/ folder), or train "
            "without model selection: evaluation.restore_best: false, evaluation.patience: null "
            "(and no schedule.plateau)",
        )
    return False


def check_loss_declarations(loss: nn.Module, model: nn.Module, data: DataConfig) -> None:
    """The batches and the model's declared output fields meet what the loss needs."""
    requirements = requirements_of(loss)
    requirements.check_batches(data)
    requirements.check_output(model_provides(model))


def lazy_modules(model: nn.Module) -> list[tuple[str, LazyInitialised]]:
    """``(name, module)`` of every :class:`LazyInitialised` module of ``model``."""
    modules = model.named_modules()
    return [(name, module) for name, module in modules if isinstance(module, LazyInitialised)]


def check_lazy_initialisation(model: nn.Module, steps: int, batch_size: int) -> None:
    """A module that initialises from training samples must have seen enough of them after
    ``steps`` steps of ``batch_size`` samples, by the first evaluation."""
    for name, module in lazy_modules(model):
        seen = module.samples_seen + max(steps, 0) * batch_size
        if not module.is_initialised and seen < module.samples_needed:
            raise ConfigError(
                "evaluation.every",
                f"{name} needs {module.samples_needed} training samples to "
                f"initialise before the first evaluation, but sees only {seen} "
                f"({steps} steps of {batch_size}); evaluate later or make it "
                "need fewer (e.g. fewer prototypes)",
            )


def finish_lazy_initialisation(model: nn.Module, step: int) -> list[str]:
    """Finish the modules that initialise from training data (GSP's k-center prototypes) before
    any weights are evaluated or saved; one line per module finished."""
    return [
        f"{name or 'model'}: initialised at step {step} from {module.finish_initialisation()} "
        "samples (before the first evaluation)"
        for name, module in lazy_modules(model)
        if not module.is_initialised
    ]


def check_warmup(model: nn.Module, warmup_steps: int) -> None:
    """The warm-up freezes the backbone: a model that is not
    :class:`~gspdml.models.freezable.Freezable` cannot warm up."""
    if warmup_steps and not isinstance(model, Freezable):
        raise ConfigError(
            "schedule.warmup_steps",
            f"the warm-up freezes the model's backbone, but "
            f"{type(model).__name__} has no backbone part; set it to 0",
        )


def check_training_dataset(dataset: Any) -> None:
    """``dataset`` follows :class:`~gspdml.data.seeded.TrainingDataset` (one label per item, item
    ``(0, 0)`` is ``(image tensor, label)``); the random generators are left as they were."""
    labels = getattr(dataset, "labels", None)
    if labels is None or len(labels) != len(dataset):
        raise DataError(
            f"the training dataset needs a labels array with one label per item "
            f"({len(dataset)} items); {ADAPTER}"
        )
    if not np.issubdtype(np.asarray(labels).dtype, np.integer):
        raise DataError(
            f"the training dataset's labels must be integers, got {np.asarray(labels).dtype}"
        )
    state = rng_state(cuda=False)
    try:
        item = dataset[(0, 0)]
    except (IndexError, KeyError, TypeError, ValueError) as error:
        raise DataError(
            f"the training dataset takes (index, epoch) keys, but item (0, 0) failed with "
            f"{type(error).__name__}: {error}; {ADAPTER}"
        ) from error
    finally:
        set_rng_state(state)
    if not (
        isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], torch.Tensor)
    ):
        raise DataError(
            f"the training dataset's items must be (image tensor, label), item (0, 0) is "
            f"{type(item).__name__}; {ADAPTER}"
        )
