"""Run a whole evaluation protocol from one config: ``gspdml protocol fair|tuning|conventional|two_stage CONFIG``
(:mod:`gspdml.cli.runs`).

The config describes one model; the protocol owns the fields that tell the models apart:

- ``fair`` (Gürbüz thesis §5.3.4.1, fair evaluation): the training classes are cut into 4 folds
  (:func:`~gspdml.data.splits.fair_protocol_folds`); the model of fold f and seed s trains with
  ``data.dataset.val_fold: f`` (``num_folds: 4``), so the dataset carves the fold's validation
  classes off its training classes, and monitors them (``evaluation.split: val``). Each model
  embeds the test split (cached as ``test_embeddings.npz``) and
  :func:`~gspdml.evaluation.aggregate.fair_protocol_results` gives the 128D / 512D numbers over
  all seeds^4 realisations; ``summary.training.steps`` is the mean ± std of the steps each
  model trained before it stopped (Gürbüz thesis Table 3.3).
- ``tuning`` (Gürbüz thesis §5.3.4.1, hyper-parameter tuning: "a single model on the 4/5 of the
  training set while using 1/5 for the validation", repeated 3 times): fold 0 of the 5 contiguous
  folds, one model per seed, early-stopping patience :data:`TUNING_PATIENCE` (else
  ``evaluation.patience``); the result is the mean ± std over the seeds of each model's metrics
  on the validation classes.
- ``conventional`` (§7.3): one model per seed on the whole training split (``val_fraction: 0``)
  that monitors the test split (``evaluation.split: test``); the best repeat is reported, and the
  mean ± std over the repeats.
- ``two_stage`` (ProxyNCA++, Teh et al. 2020, as its code runs it: ``--mode train`` then
  ``--mode trainval``): per seed, stage 1 trains on the first half of the training classes and
  validates on the second half (``val_fold: 0, num_folds: 2``) with the config's reduce-on-plateau
  schedule; stage 2 retrains from scratch on all training classes on stage 1's schedule
  (:func:`_trainval_stage_config`) and is evaluated on the test split. Reported like
  ``conventional`` over the stage-2 models.
- ``split`` (the GSP paper's Cifar Collage, supplement §2.2: a dataset that comes with its own
  validation classes, disjoint from the training and test classes): one model per seed on the
  dataset's own splits, selected on its validation split (``evaluation.split: val``) and
  evaluated on the test split; the result is the mean ± std over the seeds of each model's test
  metrics (group ``seeds``).

Every mean ± std is the sample std (:func:`gspdml.evaluation.statistics.mean_std`); ``spread``
says for every summary group what it is over and how many independently trained models it rests
on. Every model is scored by the evaluation service with the run's ``evaluation`` spec, device
and precision: ``evaluation.postprocess`` adds the post-processed twin of every summarised metric
and column, ``evaluation.clustering`` the test split's NMI to the fair, conventional and
two-stage tables. In the fair protocol a post-processing step that learns (PCA-whitening) learns
on the embeddings of all the protocol's training classes, concatenated for 512D like the test's.

Runs live in ``<root>/fold<f>-seed<s>/`` (``<root>/seed<s>/`` outside the fold protocols),
``root`` = ``<output_dir>/<name>``, resumable model by model (:mod:`gspdml.workflows.runner`);
a root folder that holds a single run is refused. ``<root>/protocol.json`` keeps every number,
``<root>/results.md`` / ``.json`` the table row (:mod:`gspdml.workflows.tables`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from gspdml.config import RunConfig, StepDecay

if TYPE_CHECKING:
    import torch
    from torch import nn

    from gspdml.data.base import DataSplits
from gspdml.data.splits import (
    FAIR_FOLDS,
    TUNING_FOLDS,
    ClassFold,
    fair_protocol_folds,
    tuning_protocol_folds,
)
from gspdml.errors import ConfigError, DataError
from gspdml.evaluation.aggregate import TABLE_METRICS, fair_protocol_results
from gspdml.evaluation.selection import POSTPROCESSED_PREFIX, round_metrics
from gspdml.evaluation.service import EvalSpec, evaluate, with_postprocessed
from gspdml.evaluation.statistics import mean_std, spread
from gspdml.output_files import atomic_write_text, json_text
from gspdml.training.run_dir import RESULTS_FILE, RESULTS_FIX, read_results
from gspdml.training.run_identity import PROTOCOL_FILE, check_not_a_run
from gspdml.workflows.runner import PlannedRun, run_planned
from gspdml.workflows.tables import (
    CONVENTIONAL_COLUMNS,
    FAIR_COLUMNS,
    SPLIT_COLUMNS,
    TUNING_COLUMNS,
    write_results_table,
)

FOLDS = {"fair": (FAIR_FOLDS, fair_protocol_folds), "tuning": (TUNING_FOLDS, tuning_protocol_folds)}
#: how many of the protocol's folds are trained: all four for fair, the one 4/5 split for tuning
FOLDS_USED = {"fair": FAIR_FOLDS, "tuning": 1}
#: tuning-protocol early-stopping patience per dataset (Gürbüz thesis §5.3.4.1, hyper-parameter tuning)
TUNING_PATIENCE = dict.fromkeys(("cub200", "cub", "cars196", "cars"), 10)
TUNING_PATIENCE.update(dict.fromkeys(("sop", "stanford_online_products", "inshop", "in_shop"), 7))
COLUMNS = {
    "fair": FAIR_COLUMNS,
    "tuning": TUNING_COLUMNS,
    "conventional": CONVENTIONAL_COLUMNS,
    "two_stage": CONVENTIONAL_COLUMNS,
    "split": SPLIT_COLUMNS,
}
PROTOCOLS = tuple(COLUMNS)
#: the training seeds of a protocol's models when none are named (a mean ± std over 3 seeds)
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
TEST_CACHE = "test_embeddings.npz"


@dataclass(frozen=True)
class ProtocolRun(PlannedRun):
    """One model of a protocol: a :class:`PlannedRun` named ``fold<f>-seed<s>`` or ``seed<s>``,
    with its fold (None outside fair and tuning) and seed."""

    fold: Optional[int]
    seed: int


def plan_protocol(
    config: RunConfig, protocol: str, seeds: Sequence[int], root: Path
) -> tuple[list[ProtocolRun], list[ClassFold]]:
    """Every model of ``protocol`` with the config it trains on, and the protocol's class folds
    (none for ``conventional``, ``two_stage`` and ``split``). Builds the dataset once to read its
    training class ids."""
    if protocol not in COLUMNS:
        raise ConfigError(
            "protocol", f"unknown protocol {protocol!r}; allowed: {', '.join(PROTOCOLS)}"
        )
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(
            "seeds", f"need at least one seed and no repeated seeds, got {list(seeds)}"
        )
    if protocol in PER_SEED:
        make = PER_SEED[protocol]
        prefix = "train-seed" if protocol == "two_stage" else "seed"
        return [
            ProtocolRun(f"{prefix}{s}", make(config, int(s)), root / f"{prefix}{s}", None, int(s))
            for s in seeds
        ], []
    num_folds, make_folds = FOLDS[protocol]
    folds = make_folds(_training_classes(config, protocol, num_folds))[: FOLDS_USED[protocol]]
    runs = []
    for fold in folds:
        for seed in map(int, seeds):
            name = f"fold{fold.index}-seed{seed}"
            run_config = _fold_config(config, protocol, fold.index, num_folds, seed)
            runs.append(ProtocolRun(name, run_config, root / name, fold.index, seed))
    return runs, folds


def run_protocol(
    config: RunConfig,
    protocol: str = "fair",
    *,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    output_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Train (or resume, or skip) every model of ``protocol`` and aggregate; see the module doc.

    Args:
        config: a resolved config (:func:`gspdml.config.load_config`) describing one model.
        protocol: ``fair``, ``tuning``, ``conventional`` or ``two_stage``.
        seeds: training seeds of each model (3 in thesis Ch. 5 -> 81 fair realisations).
        output_dir: protocol directory; default ``<config.output_dir>/<config.name>``.

    Returns the content of ``<root>/protocol.json`` plus ``runs``: {run name: "trained" |
    "resumed" | "done"} (what this call did with each model).
    """
    root = Path(output_dir) if output_dir is not None else Path(config.output_dir) / config.name
    check_not_a_run(root)
    if protocol == "two_stage":
        runs, folds, status = _run_two_stage(config, seeds, root)
    else:
        runs, folds = plan_protocol(config, protocol, seeds, root)
        status = {run.name: _train_or_skip(run) for run in runs}
    if protocol == "fair":
        result = _fair_summary(runs)
    elif protocol == "tuning":
        result = _tuning_summary(runs)
    elif protocol == "split":
        result = _split_summary(runs)
    else:
        result = _conventional_summary(runs, config.evaluation.metric)
        if protocol == "two_stage":
            result["stages"] = {
                run.name: read_results(run.run_dir.parent / run.name.replace("trainval", "train"))
                for run in runs
            }
    write_results_table(
        {config.name: result}, root / "results", columns=table_columns(protocol, config)
    )
    payload = {
        "protocol": protocol,
        "name": config.name,
        "seeds": [int(s) for s in seeds],
        "folds": [
            {
                "fold": f.index,
                "train_classes": len(f.train_classes),
                "val_classes": f.val_classes.tolist(),
            }
            for f in folds
        ],
        **result,
    }
    atomic_write_text(root / PROTOCOL_FILE, json_text(payload, indent=2) + "\n")
    return {**payload, "runs": status}


# ---------------------------------------------------------------------------------- run configs
def _dataset_options(config: RunConfig) -> set[str]:
    from gspdml.data import DATASETS

    return set(
        inspect.signature(DATASETS.get(config.data.dataset_name, "data.dataset.name")).parameters
    )


def _fold_config(
    config: RunConfig, protocol: str, fold: int, num_folds: int, seed: int
) -> RunConfig:
    name = config.data.dataset_name
    if "val_fold" not in _dataset_options(config):
        raise ConfigError(
            "data.dataset.name",
            f"dataset {name!r} has no val_fold option, so the {protocol} protocol "
            "cannot carve validation folds off its training classes",
        )
    spec = {
        k: v for k, v in config.data.dataset.items() if k not in ("val_classes", "val_fraction")
    }
    spec.update(val_fold=fold, num_folds=num_folds)
    patience = config.evaluation.patience
    if protocol == "tuning":
        patience = TUNING_PATIENCE.get(name, patience)
    return replace(
        config,
        name=f"{config.name}-fold{fold}-seed{seed}",
        seed=seed,
        data=replace(config.data, dataset=spec),
        evaluation=replace(config.evaluation, split="val", patience=patience),
    )


def _conventional_config(config: RunConfig, seed: int) -> RunConfig:
    spec = {k: v for k, v in config.data.dataset.items() if k not in ("val_fold", "val_classes")}
    if "val_fraction" in _dataset_options(config):
        spec["val_fraction"] = 0.0
    return replace(
        config,
        name=f"{config.name}-seed{seed}",
        seed=seed,
        data=replace(config.data, dataset=spec),
        evaluation=replace(config.evaluation, split="test"),
    )


def _split_config(config: RunConfig, seed: int) -> RunConfig:
    """The model of ``seed`` in the ``split`` protocol."""
    return replace(
        config,
        name=f"{config.name}-seed{seed}",
        seed=seed,
        evaluation=replace(config.evaluation, split="val"),
    )


def _train_stage_config(config: RunConfig, seed: int) -> RunConfig:
    """Stage 1 of ``two_stage``: the first half of the training classes, validated on the second."""
    if not config.schedule.plateau:
        raise ConfigError(
            "schedule.plateau",
            "the two_stage protocol records the plateau drops of its first stage; "
            "set schedule.plateau (ProxyNCA++: {factor: 0.1, patience: 4})",
        )
    return replace(
        _fold_config(config, "two_stage", 0, 2, seed), name=f"{config.name}-train-seed{seed}"
    )


#: the protocols of one model per seed, with the config of the seed's (first) model
PER_SEED = {
    "conventional": _conventional_config,
    "two_stage": _train_stage_config,
    "split": _split_config,
}
#: the protocols whose result models are one per seed, with the folder of the seed's model
#: (``{seed}`` in the template: ``model.init_from`` of a row that fine-tunes them)
SEED_MODELS = {
    "conventional": "seed{seed}",
    "two_stage": "trainval-seed{seed}",
    "split": "seed{seed}",
}


def _trainval_stage_config(
    config: RunConfig, seed: int, stage1: dict[str, Any], ratio: float
) -> RunConfig:
    """Stage 2 of ``two_stage`` as ProxyNCA++'s ``train.py --mode trainval`` runs it: all
    training classes; a warm-up of as many *epochs* as stage 1's (its steps times ``ratio``, the
    training images of stage 2 over stage 1); then the main epochs up to stage 1's best one, with
    no selection (the last weights are the model); the rate cut by the plateau factor one epoch
    after each epoch at which stage 1's rate dropped (the code's ``MultiStepLR.step(e)`` at the end
    of epoch ``e``). An epoch is one validation round (``evaluation.every``)."""
    run = _conventional_config(config, seed)
    warmup, every = config.schedule.warmup_steps, config.evaluation.every

    def stage2_step(step: int) -> int:  # warm-up steps and main steps scale alike, apart
        if step <= warmup:
            return round(step * ratio)
        return round(warmup * ratio) + round((step - warmup) * ratio)

    length = max(stage2_step(int(stage1["best_step"])), 1)
    drops = [stage2_step(int(s) + every) for s in stage1["lr_drop_steps"]]
    drops = [s for s in drops if 1 <= s < length]
    plateau = config.schedule.plateau  # stage 1 drops the rate on its plateaus
    decay = None
    if drops and plateau is not None:
        decay = StepDecay(factor=plateau.factor, milestones=tuple(drops))
    schedule = replace(
        run.schedule,
        plateau=None,
        max_steps=length,
        warmup_steps=min(stage2_step(warmup), length),
        step_decay=decay,
    )
    return replace(
        run,
        name=f"{config.name}-trainval-seed{seed}",
        schedule=schedule,
        evaluation=replace(run.evaluation, patience=None, restore_best=False),
    )


def _run_two_stage(
    config: RunConfig, seeds: Sequence[int], root: Path
) -> tuple[list[ProtocolRun], list[ClassFold], dict[str, str]]:
    first, _ = plan_protocol(config, "two_stage", seeds, root)
    status, second = {}, []
    for run in first:
        status[run.name] = _train_or_skip(run)
        stage1 = _results(run, {"best_step": int, "lr_drop_steps": list})
        name = f"trainval-seed{run.seed}"
        ratio = _train_size(_conventional_config(config, run.seed)) / _train_size(run.config)
        run_config = _trainval_stage_config(config, run.seed, stage1, ratio)
        second.append(ProtocolRun(name, run_config, root / name, None, run.seed))
        status[name] = _train_or_skip(second[-1])
    return second, [], status


def _train_size(config: RunConfig) -> int:
    from gspdml.data import build_data

    return len(build_data(config.data.dataset, seed=config.seed).train)


def _training_classes(config: RunConfig, protocol: str, num_folds: int) -> np.ndarray:
    """All training class ids: those of fold 0's training and validation splits together."""
    from gspdml.data import build_data

    data_config = _fold_config(config, protocol, 0, num_folds, config.seed).data
    data = build_data(data_config.dataset, seed=config.seed)
    parts = [data.train] + ([data.val.query] if data.val is not None else [])
    ids = [c for c in (getattr(part, "classes", None) for part in parts) if c is not None]
    if len(ids) < len(parts):
        raise ConfigError(
            "data.dataset",
            f"dataset {data_config.dataset_name!r} does not expose the class ids of its splits "
            f"(`classes`), which the {protocol} protocol needs",
        )
    return np.unique(np.concatenate(ids))


def _train_or_skip(run: ProtocolRun) -> str:
    """Train, resume or reuse one model (:mod:`gspdml.workflows.runner`); a model that trains
    again drops the test embeddings cached from an earlier model."""
    return run_planned(
        run, before_training=lambda r: (r.run_dir / TEST_CACHE).unlink(missing_ok=True)
    ).status


# ---------------------------------------------------------------------------------- aggregation
def _load(run: ProtocolRun) -> tuple[RunConfig, nn.Module, DataSplits, torch.device]:
    from gspdml.data import build_data
    from gspdml.models.inference import resolve_device
    from gspdml.training import load_run

    device = resolve_device(run.config.trainer.device)
    config, model = load_run(run.run_dir, device=str(device))
    return config, model, build_data(config.data.dataset, seed=config.seed), device


def _embedding_kwargs(config: RunConfig, device: torch.device) -> dict[str, Any]:
    """How the trainer embedded for its evaluations (the precision resolved here, once)."""
    from gspdml.compat.hardware import resolve_precision

    return {
        "batch_size": config.data.eval_batch_size,
        "device": device,
        "precision": resolve_precision(config.trainer.precision, device),
        "num_workers": config.data.num_workers,
    }


def _spec(config: RunConfig, metrics: Optional[tuple[str, ...]] = None) -> EvalSpec:
    return EvalSpec.from_evaluation(config.evaluation, metrics=metrics)


def _test_embeddings(run: ProtocolRun) -> tuple[tuple[np.ndarray, ...], Optional[np.ndarray]]:
    """The test split's (emb, labels) or (query, query_labels, gallery, gallery_labels), and the
    embeddings of all the protocol's training classes when a post-processing step learns on
    them (the same items for every fold model, so that realisations can concatenate them);
    cached in the run directory (written atomically; a damaged file is rebuilt)."""
    from gspdml.data import build_data
    from gspdml.data.cache import read_arrays, write_arrays
    from gspdml.models.inference import embed, split_embeddings

    cache = run.run_dir / TEST_CACHE
    with_train = _spec(run.config).needs_training_embeddings
    arrays = read_arrays(cache)  # None when missing or damaged (a kill, a full disk): rebuilt
    if arrays is None or (with_train and "train" not in arrays):
        config, model, data, device = _load(run)
        options = _embedding_kwargs(config, device)
        if data.test is None:
            raise DataError(f"{run.run_dir}: its dataset has no test split to evaluate")
        query, query_labels, gallery, gallery_labels = split_embeddings(model, data.test, **options)
        arrays = {"query": query.numpy(), "query_labels": query_labels.numpy()}
        if gallery is not None and gallery_labels is not None:
            arrays.update(gallery=gallery.numpy(), gallery_labels=gallery_labels.numpy())
        if with_train:
            every_class = _conventional_config(config, config.seed).data.dataset
            train = build_data(every_class, seed=config.seed).train
            arrays["train"] = embed(model, train, **options)[0].numpy()
        write_arrays(cache, arrays)
    names = (
        ("query", "query_labels", "gallery", "gallery_labels")
        if "gallery" in arrays
        else ("query", "query_labels")
    )
    return tuple(arrays[n] for n in names), (arrays["train"] if with_train else None)


def _fair_summary(runs: list[ProtocolRun]) -> dict[str, Any]:
    from gspdml.compat.hardware import resolve_precision
    from gspdml.models.inference import resolve_device

    config = runs[0].config
    device = resolve_device(config.trainer.device)  # the search where the runs trained
    cached = {(run.fold, run.seed): _test_embeddings(run) for run in runs}
    train = {key: value[1] for key, value in cached.items() if value[1] is not None}
    result = fair_protocol_results(
        {key: value[0] for key, value in cached.items()},
        metrics=(*TABLE_METRICS, *_clustered(runs[0].config)),
        spec=_spec(runs[0].config),
        train_embeddings=train,
        device=device,
        precision=resolve_precision(config.trainer.precision, device),
    )
    names = {(run.fold, run.seed): run.name for run in runs}
    steps = [_results(run, {"steps": int})["steps"] for run in runs]
    return {
        **result,
        "per_model": {names[key]: value for key, value in result["per_model"].items()},
        "summary": {**result["summary"], "training": {"steps": mean_std(steps)}},
        "spread": {**result["spread"], "training": spread("models", len(runs), len(runs))},
    }


def _clustered(config: RunConfig) -> tuple[str, ...]:
    """``("nmi",)`` when the config clusters the test split (``evaluation.clustering``)."""
    return ("nmi",) if config.evaluation.clustering else ()


def _summarised(config: RunConfig) -> tuple[str, ...]:
    """The metrics a test summary aggregates: P@1 and MAP@R (NMI too when the config clusters)
    and their post-processed twins."""
    return with_postprocessed((*TABLE_METRICS, *_clustered(config)), _spec(config))


def table_columns(protocol: str, config: RunConfig) -> tuple[tuple[str, str, str], ...]:
    """The table columns of ``protocol``, each followed by its post-processed twin when the
    config post-processes, then an NMI column per MAP@R column when the config clusters."""
    columns = COLUMNS[protocol]
    if config.evaluation.postprocess:
        twin = POSTPROCESSED_PREFIX
        columns = tuple(
            column
            for group, metric, title in columns
            for column in (
                (group, metric, title),
                (group, twin + metric, f"{title} (post-processed)"),
            )
        )
    if protocol == "tuning" or not _clustered(config):
        return columns
    nmi = tuple(
        (group, "nmi", title.replace("MAP@R", "NMI"))
        for group, metric, title in COLUMNS[protocol]
        if metric == "map_at_r"
    )
    return (*columns, *nmi)


def _mean_std(per_model: dict[str, Any], metrics: Sequence[str]) -> dict[str, Any]:
    return {m: mean_std([v[m] for v in per_model.values()]) for m in metrics}


def _tuning_summary(runs: list[ProtocolRun]) -> dict[str, Any]:
    """Each model's metrics on its validation classes, as a validation round scores them."""
    per_model = {}
    for run in runs:
        config, model, data, device = _load(run)
        if data.val is None:
            raise DataError(f"{run.run_dir}: its dataset has no validation split to evaluate")
        per_model[run.name] = evaluate(
            model,
            data.val,
            _spec(config, round_metrics()),
            train_split=data.train,
            **_embedding_kwargs(config, device),
        ).metrics
    metrics = with_postprocessed(TABLE_METRICS, _spec(runs[0].config))
    return {
        "per_model": per_model,
        "summary": {"val": _mean_std(per_model, metrics)},
        "spread": {"val": spread("seeds", len(runs), len(runs))},
        "num_realisations": len(runs),
    }


def _test_results(runs: list[ProtocolRun]) -> dict[str, Any]:
    """Each model's test metrics, as its trainer recorded them (``results.json``)."""
    return {run.name: _results(run, {"test": dict})["test"] for run in runs}


def _results(run: ProtocolRun, required: dict[str, type]) -> dict[str, Any]:
    """A trained run's checked ``results.json`` (:func:`~gspdml.training.run_dir.read_results`)."""
    results = read_results(run.run_dir, required)
    if results is None:
        raise DataError(f"{run.run_dir / RESULTS_FILE}: file not found; {RESULTS_FIX}")
    return results


def _split_summary(runs: list[ProtocolRun]) -> dict[str, Any]:
    per_model = _test_results(runs)
    return {
        "per_model": per_model,
        "num_realisations": len(runs),
        "summary": {"seeds": _mean_std(per_model, _summarised(runs[0].config))},
        "spread": {"seeds": spread("seeds", len(runs), len(runs))},
    }


def _conventional_summary(runs: list[ProtocolRun], metric: str) -> dict[str, Any]:
    per_model = _test_results(runs)
    best = max(per_model, key=lambda name: per_model[name][metric])
    metrics = _summarised(runs[0].config)
    return {
        "per_model": per_model,
        "best_run": best,
        "num_realisations": len(runs),
        "summary": {
            "best": {m: {"mean": per_model[best][m]} for m in metrics},
            "repeats": _mean_std(per_model, metrics),
        },
        "spread": {"repeats": spread("repeats", len(runs), len(runs))},
    }
