"""The run schema: one frozen section per block of a run config, each field with its type,
default, range and meaning. This module is the single source of every default and every value
check of a run (``docs/configuration.md`` is generated from it by
:mod:`gspdml.config.reference`).

A component spec (``data.dataset``, ``model.backbone``, ``model.pooling``, ``loss``) is a
mapping ``{name: ..., **options}``; its options are typed by the component's constructor and
checked by its registry (:mod:`gspdml.config.components`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, Optional, Union

import torch

from gspdml.compat.hardware import PRECISIONS
from gspdml.errors import ConfigError
from gspdml.registry import parse_spec
from gspdml.settings.schema import REQUIRED, Section, join, option

#: a component spec in canonical form: ``{"name": ..., **options}``
Spec = dict[str, Any]


def spec_name(spec: Any) -> str:
    """The registered name a component spec names (any form :func:`parse_spec` reads)."""
    return parse_spec(spec, "")[0]


def canonical_spec(value: Any, field: str) -> Any:
    """A component spec in its stored form ``{"name": ..., **options}`` (from a name, or from
    ``{name: {options}}``); any other value is left for the type check to name."""
    if isinstance(value, str) or (
        isinstance(value, Mapping) and "name" not in value and len(value) == 1
    ):
        name, options = parse_spec(value, field)
        return {"name": name, **options}
    return value


def _require(condition: bool, field: str, message: str) -> None:
    if not condition:
        raise ConfigError(field, message)


def _run_name(value: str, field: str) -> None:
    _require(
        value != "" and "/" not in value,
        field,
        f"expected a non-empty name without '/', got {value!r}",
    )


def _device(value: str, field: str) -> None:
    if value == "auto":
        return
    try:
        torch.device(value)
    except RuntimeError:
        raise ConfigError(field, f"expected 'auto', 'cpu' or 'cuda[:i]', got {value!r}") from None


#: why ``model.cache_backbone_features`` needs a frozen backbone
FROZEN_ONLY = (
    "needs a frozen backbone (model.backbone.frozen: true): a trained backbone's maps change at "
    "every step"
)

#: the K of Recall@K when nothing names them (the papers' R@1, 2, 4, 8)
RECALL_AT: tuple[int, ...] = (1, 2, 4, 8)

#: the most classes ``data.classes_per_batch: auto`` puts in a batch
AUTO_CLASSES_PER_BATCH = 16


@dataclasses.dataclass(frozen=True)
class DataConfig(Section):
    dataset: Spec = option(
        {"name": "collage_digits"},
        "the dataset reader and its options (gspdml list datasets)",
        canonical=canonical_spec,
    )
    classes_per_batch: Union[int, Literal["auto"]] = option(
        16,
        "classes in one training batch (auto: every training class, at most 16; even with halves)",
        minimum=1,
    )
    samples_per_class: int = option(4, "images of each class in one training batch", minimum=1)
    halves: bool = option(False, "split each batch into two class-disjoint halves (XML, ZSR)")
    replacement: bool = option(False, "draw a class's images with replacement when it has too few")
    sampler: Literal["balanced", "random"] = option(
        "balanced",
        "balanced: classes_per_batch x samples_per_class; random: as many random images",
        noun="sampler",
    )
    num_workers: Union[int, Literal["auto"]] = option(
        "auto",
        "data-loading processes (0: in the training process; auto: on a GPU the cores less one, "
        "at most 16, on a CPU 0)",
        minimum=0,
    )
    eval_batch_size: int = option(
        256, "images per batch when embedding an evaluation split", minimum=1
    )
    eval_transform: Optional[dict[str, Any]] = option(
        None,
        "image file -> model input at evaluation and retrieval (null: the dataset's own; "
        "a trained run records it)",
    )

    @property
    def dataset_name(self) -> str:
        """The registered name of the dataset reader."""
        return spec_name(self.dataset)

    @property
    def dataset_root(self) -> Optional[str]:
        """The folder (``root``) or file (``path``) the reader reads, if it reads one."""
        root = self.dataset.get("root", self.dataset.get("path"))
        return None if root is None else str(root)

    @property
    def val_fold(self) -> Optional[int]:
        """The validation fold of a fold protocol's run (``data.dataset.val_fold``), else None."""
        fold = self.dataset.get("val_fold")
        return None if fold is None else int(fold)

    def batch_classes(self, training_classes: int) -> int:
        """``classes_per_batch`` for a training split of ``training_classes`` classes."""
        if self.classes_per_batch != "auto":
            return self.classes_per_batch
        count = min(training_classes, AUTO_CLASSES_PER_BATCH)
        return count - count % 2 if self.halves else count

    def check(self, where: str) -> None:
        _require(
            not (self.sampler == "random" and self.halves),
            join(where, "halves"),
            "class-disjoint halves need the balanced sampler (data.sampler: balanced)",
        )
        _require(
            not self.halves or self.classes_per_batch == "auto" or self.classes_per_batch % 2 == 0,
            join(where, "classes_per_batch"),
            "must be even when data.halves is true (two class-disjoint halves), "
            f"got {self.classes_per_batch}",
        )


@dataclasses.dataclass(frozen=True)
class ModelConfig(Section):
    backbone: Spec = option(
        {"name": "small_cnn"},
        "the feature extractor and its options (gspdml list backbones)",
        canonical=canonical_spec,
    )
    embedding_dim: Optional[int] = option(
        128, "size of the embedding (null: the pooled channels)", minimum=1
    )
    head: Optional[Literal["local", "global"]] = option(
        None,
        "where the head goes: local (1x1 conv before pooling), global (linear after it), "
        "null (the pooling's own placement)",
        noun="head position",
    )
    head_bias: bool = option(True, "whether the head has a bias")
    pooling: Spec = option(
        {"name": "gap"},
        "the pooling and its options (gspdml list poolings)",
        canonical=canonical_spec,
    )
    pooled_norm: Optional[Literal["layer_norm"]] = option(
        None, "a normalisation of the pooled vector", noun="pooled_norm"
    )
    normalize: Union[bool, Literal["clip"]] = option(
        True, "L2-normalise the embedding (clip: v / max(1, ||v||), CCP's unit ball)"
    )
    cache_backbone_features: bool = option(
        False, "compute each image's backbone map once (frozen backbones only)"
    )
    init_from: Optional[str] = option(
        None,
        "a finished run's folder whose weights start the model where names and shapes match "
        "(fine-tuning; {seed}: this run's seed)",
        noun="run folder",
    )
    factory: Optional[str] = option(
        None,
        "'module:function' returning the model given to the Trainer when the sections above do "
        "not describe it (a model of your own); the run is reloaded with it",
        noun="factory",
    )

    @property
    def pretrained_backbone(self) -> bool:
        """Whether ``backbone`` loads pre-trained weights (``pretrained`` or ``weights`` set)."""
        return bool(self.backbone.get("pretrained")) or bool(self.backbone_recipe)

    @property
    def backbone_name(self) -> str:
        """The registered name of the backbone."""
        return spec_name(self.backbone)

    @property
    def pooling_name(self) -> str:
        """The registered name of the pooling."""
        return spec_name(self.pooling)

    @property
    def backbone_recipe(self) -> Any:
        """The backbone's ``weights`` option as given (a file, a pre-training recipe's name or
        YAML file, or a recipe mapping), None without one."""
        return self.backbone.get("weights")

    @property
    def backbone_weights(self) -> Optional[str]:
        """The backbone's ``weights`` option when it names a file or a recipe (not a mapping)."""
        weights = self.backbone_recipe
        return weights if isinstance(weights, str) else None

    def check(self, where: str) -> None:
        _require(
            not self.cache_backbone_features or self.backbone.get("frozen") is True,
            join(where, "cache_backbone_features"),
            FROZEN_ONLY,
        )


@dataclasses.dataclass(frozen=True)
class LrMultipliers(Section):
    backbone: float = option(1.0, "learning-rate factor of the backbone", minimum=0)
    head: float = option(1.0, "learning-rate factor of the head", minimum=0)
    pooling: float = option(
        1.0, "learning-rate factor of the pooling (losses declare their own)", minimum=0
    )


@dataclasses.dataclass(frozen=True)
class OptimizerConfig(Section):
    name: Literal["adam", "adamw", "radam", "sgd"] = option(
        "adam", "the optimiser", noun="optimizer"
    )
    lr: float = option(1.0e-3, "base learning rate", minimum=0, exclusive=True)
    weight_decay: float = option(1.0e-4, "L2 penalty (decoupled for adamw)", minimum=0)
    betas: tuple[float, float] = option((0.9, 0.99), "Adam's moment decays", minimum=0, below=1)
    momentum: float = option(0.9, "SGD's momentum", minimum=0, below=1)
    eps: float = option(1.0e-8, "Adam's denominator term", minimum=0, exclusive=True)
    lr_multipliers: LrMultipliers = option(
        LrMultipliers, "learning-rate factors per parameter group"
    )
    grad_clip_norm: Optional[float] = option(
        None, "clip the gradients' global norm to this", minimum=0, exclusive=True
    )
    grad_clip_value: Optional[float] = option(
        None, "clip each gradient entry to this", minimum=0, exclusive=True
    )


@dataclasses.dataclass(frozen=True)
class Plateau(Section):
    factor: float = option(
        0.5, "learning-rate factor at a plateau", minimum=0, exclusive=True, below=1
    )
    patience: int = option(
        4,
        "rounds without improvement before a drop (keras: the patience-th; torch: the one after)",
        minimum=1,
    )
    min_lr: float = option(1.0e-6, "the learning rate does not drop below this", minimum=0)
    convention: Literal["keras", "torch"] = option(
        "keras",
        "keras: tf.keras ReduceLROnPlateau (drop at `patience` bad rounds, a round improves by "
        "more than `threshold`); torch: torch's ReduceLROnPlateau (drop after more than "
        "`patience` bad rounds, a round improves by more than `threshold` x best)",
        noun="convention",
    )
    threshold: float = option(
        0.0,
        "the improvement a round needs: absolute (keras' min_delta) or relative (torch's "
        "threshold, 1e-4 in torch)",
        minimum=0,
    )


@dataclasses.dataclass(frozen=True)
class StepDecay(Section):
    factor: float = option(REQUIRED, "learning-rate factor at each drop", minimum=0, exclusive=True)
    every: Optional[int] = option(None, "drop every this many steps", minimum=1)
    milestones: Optional[tuple[int, ...]] = option(None, "drop at these steps", minimum=1)

    def check(self, where: str) -> None:
        _require(
            (self.every is None) != (self.milestones is None),
            where,
            "expected {every: steps, factor: number} or {milestones: [steps], factor: number}",
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in super().to_dict().items() if v is not None}


@dataclasses.dataclass(frozen=True)
class ScheduleConfig(Section):
    max_steps: int = option(2000, "training steps", minimum=1)
    warmup_steps: int = option(0, "steps with the backbone frozen at the start", minimum=0)
    fresh_optimizer_after_warmup: bool = option(
        False,
        "start the optimiser afresh (moments and step counts reset) when the warm-up ends, "
        "as ProxyNCA++'s train.py does (its opt_warmup, then opt)",
    )
    plateau: Optional[Plateau] = option(None, "reduce the learning rate on a validation plateau")
    step_decay: Optional[StepDecay] = option(None, "reduce the learning rate at fixed steps")

    def check(self, where: str) -> None:
        _require(
            self.plateau is None or self.step_decay is None,
            join(where, "step_decay"),
            "use either schedule.plateau or schedule.step_decay, not both",
        )


@dataclasses.dataclass(frozen=True)
class EvaluationConfig(Section):
    every: int = option(100, "steps between validation rounds", minimum=1)
    split: Literal["val", "test"] = option("val", "the split validation rounds use", noun="split")
    metric: str = option("map_at_r", "the selection metric")
    patience: Optional[int] = option(
        15, "rounds without improvement before early stopping (null: never)", minimum=1
    )
    restore_best: bool = option(True, "end with the weights of the best round")
    during_warmup: bool = option(
        True,
        "validation rounds (selection, patience, plateau) during the warm-up; false: the first "
        "round is `every` steps after it (ProxyNCA++'s train.py)",
    )
    recall_at: tuple[int, ...] = option(
        RECALL_AT, "the K of Recall@K and of the other metrics at a cutoff K", minimum=1
    )
    metrics: tuple[str, ...] = option(
        (),
        "metrics the test split and gspdml evaluate report besides the default MAP@R, P@1, "
        "R-precision and Recall@K, e.g. mean_average_precision (whole ranking), map_at_k "
        "(gspdml list metrics)",
    )
    postprocess: tuple[Union[str, dict[str, Any]], ...] = option(
        (), "post-processing steps (pca_whiten, dba, qe, k_reciprocal), reported as postprocessed_*"
    )
    select_postprocessed: bool = option(False, "select by evaluation.metric after post-processing")
    clustering: bool = option(
        False,
        "also report nmi and ami (k-means on the embeddings, one cluster per class) for the "
        "test split and the protocol tables (the ProxyNCA++ tables' NMI)",
    )
    baseline: bool = option(
        True,
        "also evaluate the test split with the step-0 model and a pretrained backbone's own "
        "average-pooled features, and warn when training scored worse",
    )


@dataclasses.dataclass(frozen=True)
class TrainerConfig(Section):
    precision: Literal[PRECISIONS] = option(  # type: ignore[valid-type]
        "auto", "auto: bf16 where the hardware has it, else fp32 (gspdml doctor)", noun="precision"
    )
    device: str = option("auto", "auto (the GPU when there is one), cpu, cuda[:i]", check=_device)
    log_every: int = option(10, "steps between training-loss lines in metrics.jsonl", minimum=1)
    progress: bool = option(True, "show a progress bar (and the feature cache's progress lines)")
    distributed: Literal["auto", "off"] = option(
        "auto", "auto: data-parallel when launched by torchrun", noun="value"
    )
    keep_freed_memory: bool = option(True, "keep freed host memory mapped (faster steps on CPU)")
    compile: Union[bool, str] = option(
        False,
        "torch.compile the model for the training step: true (inductor) or a backend name "
        "(benchmarks/train_step.py measures it)",
    )
    checkpoint_every: Optional[int] = option(
        None, "steps between checkpoints besides every round", minimum=1
    )
    tensorboard: Union[Literal["auto"], bool] = option(
        "auto", "auto: when the tensorboard package is installed"
    )
    trackers: tuple[Literal["mlflow", "mlflow_file", "wandb"], ...] = option(
        (),
        "experiment trackers that get every metrics.jsonl record, offline: mlflow (a SQLite "
        "store in output_dir), mlflow_file (MLflow's file store, output_dir/mlruns; sets "
        "MLFLOW_ALLOW_FILE_STORE=true), wandb (offline, in the run folder)",
        noun="tracker",
    )


@dataclasses.dataclass(frozen=True)
class RunConfig(Section):
    """One run, completely (see :mod:`gspdml.config`)."""

    name: str = option("run", "the run's name (its folder under output_dir)", check=_run_name)
    description: str = option("", "free text")
    plugins: tuple[str, ...] = option(
        (),
        "modules to import before the components are checked: they register poolings, losses, "
        "backbones or datasets of your own (entry points of the gspdml.plugins group are "
        "imported too)",
    )
    output_dir: str = option("runs", "where run folders go")
    seed: int = option(0, "seed of everything random in the run", minimum=0)
    data: DataConfig = option(DataConfig, "data: reader, batches, evaluation transform")
    model: ModelConfig = option(ModelConfig, "the embedder")
    loss: Union[Spec, list[Any]] = option(
        {"name": "c2"}, "the loss and its options (gspdml list losses)"
    )
    optimizer: OptimizerConfig = option(OptimizerConfig, "optimiser and parameter groups")
    schedule: ScheduleConfig = option(ScheduleConfig, "steps and learning-rate schedule")
    evaluation: EvaluationConfig = option(EvaluationConfig, "validation rounds and model selection")
    trainer: TrainerConfig = option(TrainerConfig, "precision, device, logging, checkpoints")

    @property
    def loss_names(self) -> tuple[str, ...]:
        """The registered name of the loss, or of each term of a weighted sum of losses."""
        specs = self.loss if isinstance(self.loss, list) else [self.loss]
        return tuple(spec_name(spec) for spec in specs)
