"""Run a whole evaluation protocol from one config: ``gspdml protocol fair|tuning CONFIG``.

For every fold (:mod:`gspdml.evaluation.protocols`) and seed, one run is trained with
:func:`gspdml.training.train` in ``<root>/fold<f>-seed<s>/`` (``root`` = ``<output_dir>/<name>``
of the config), its validation classes set to the fold's (``data.dataset.val_classes``) and its
``seed`` to the seed. Runs are resumable model by model: a run with ``results.json`` is finished
and skipped, a run with a checkpoint is resumed, the others start. Then:

- ``fair``: each model embeds the test split (cached as ``test_embeddings.npz`` in its run dir) and
  :func:`~gspdml.evaluation.aggregate.fair_protocol_results` gives the 128D / 512D numbers over
  all seeds^folds realisations; ``<root>/protocol.json`` keeps everything and ``<root>/results.md``
  / ``.json`` the table row.
- ``tuning``: each model is evaluated on its own validation classes; the result is the mean (and
  std) of the validation metrics over folds and seeds (thesis §5.3, L1302).

The training class ids come from ``train_classes`` or, by default, from the dataset built with
``val_fraction: 0`` (its training split must expose the original class ids as ``classes``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gspdml.errors import ConfigError
from gspdml.evaluation.aggregate import fair_protocol_results
from gspdml.evaluation.protocols import fair_protocol_folds, tuning_protocol_folds
from gspdml.evaluation.tables import write_results_table

PROTOCOLS = {"fair": fair_protocol_folds, "tuning": tuning_protocol_folds}


def run_protocol(
    config: dict,
    protocol: str = "fair",
    *,
    seeds: Sequence[int] = (0, 1, 2),
    output_dir=None,
    train_classes=None,
) -> dict:
    """Train every (fold, seed) model of ``protocol`` (resuming finished work) and aggregate.

    Args:
        config: a resolved config (:func:`gspdml.config.load_config`).
        protocol: "fair" (4 folds, test results as 128D / 512D over seeds^4 realisations) or
            "tuning" (5 folds, mean validation metrics).
        seeds: training seeds of each fold model (3 in thesis Ch. 5 -> 81 realisations).
        output_dir: protocol directory; default ``<config.output_dir>/<config.name>``.
        train_classes: original ids of the training classes; default: read from the dataset.

    Returns the aggregate written to ``<root>/protocol.json``.
    """
    from gspdml.training import train

    if protocol not in PROTOCOLS:
        raise ConfigError("protocol", f"unknown protocol {protocol!r}; allowed: {sorted(PROTOCOLS)}")
    if not seeds:
        raise ConfigError("seeds", "at least one seed is needed")
    root = Path(output_dir) if output_dir is not None else Path(config["output_dir"]) / config["name"]
    classes = _training_classes(config) if train_classes is None else np.asarray(train_classes)
    folds = PROTOCOLS[protocol](classes)
    run_dirs = {}
    for fold in folds:
        for seed in seeds:
            run_dir = root / f"fold{fold.index}-seed{seed}"
            run_dirs[fold.index, seed] = run_dir
            if (run_dir / "results.json").exists():
                continue
            run_config = copy.deepcopy(config)
            run_config["name"] = f"{config['name']}-fold{fold.index}-seed{seed}"
            run_config["seed"] = int(seed)
            run_config["data"]["dataset"]["val_classes"] = fold.val_classes.tolist()
            resume = (run_dir / "checkpoints" / "last.safetensors").exists()
            train(run_config, run_dir, resume=resume)
    if protocol == "fair":
        result = fair_protocol_results({key: _test_embeddings(path) for key, path in run_dirs.items()})
        write_results_table({config["name"]: result}, root / "results")
        result = {**result, "per_model": {f"fold{f}-seed{s}": v for (f, s), v in result["per_model"].items()}}
    else:
        result = _tuning_summary(run_dirs)
    (root / "protocol.json").write_text(json.dumps({"protocol": protocol, **result}, indent=2) + "\n")
    return result


def add_parser(subparsers) -> None:
    """Register ``gspdml protocol {fair,tuning} CONFIG [overrides] [--seeds ...] [--output-dir]``."""
    p = subparsers.add_parser("protocol", help="train and aggregate all fold models of an evaluation protocol")
    p.add_argument("protocol", choices=sorted(PROTOCOLS))
    p.add_argument("config", help="YAML config file (one fold model)")
    p.add_argument("overrides", nargs="*", help="overrides key.sub=value (values are YAML)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="training seeds per fold")
    p.add_argument("--output-dir", type=Path, default=None, help="default: <output_dir>/<name>")
    p.set_defaults(func=_cmd_protocol)


def _cmd_protocol(args) -> int:
    from gspdml.config import load_config
    from gspdml.evaluation.tables import results_table_markdown

    config = load_config(args.config, args.overrides)
    result = run_protocol(config, args.protocol, seeds=args.seeds, output_dir=args.output_dir)
    if args.protocol == "fair":
        print(results_table_markdown({config["name"]: result}), end="")
    else:
        print(json.dumps(result["summary"], indent=2))
    return 0


def _training_classes(config: dict) -> np.ndarray:
    from gspdml.data import build_data

    spec = copy.deepcopy(config["data"]["dataset"])
    spec["val_fraction"] = 0.0
    data = build_data(spec, seed=int(config["seed"]))
    classes = getattr(data.train, "classes", None)
    if classes is None:
        raise ConfigError(
            "data.dataset", "the training split does not expose its class ids (`classes`); pass train_classes"
        )
    return np.asarray(classes)


def _load_model_and_data(run_dir: Path):
    from gspdml.data import build_data
    from gspdml.training import load_run

    config, model = load_run(run_dir)
    return config, model, build_data(config["data"]["dataset"], seed=int(config["seed"]))


def _test_embeddings(run_dir: Path) -> tuple:
    """(emb, labels) or (query, query_labels, gallery, gallery_labels) of the test split, cached."""
    from gspdml.training import embed

    cache = run_dir / "test_embeddings.npz"
    if not cache.exists():
        config, model, data = _load_model_and_data(run_dir)
        batch = config["data"]["eval_batch_size"]
        arrays = dict(zip(("query", "query_labels"), (t.numpy() for t in embed(model, data.test.query, batch))))
        if data.test.gallery is not None:
            arrays.update(zip(("gallery", "gallery_labels"), (t.numpy() for t in embed(model, data.test.gallery, batch))))
        np.savez(cache, **arrays)
    with np.load(cache) as f:
        names = ("query", "query_labels", "gallery", "gallery_labels") if "gallery" in f else ("query", "query_labels")
        return tuple(f[n] for n in names)


def _tuning_summary(run_dirs: dict) -> dict:
    from gspdml.training import evaluate_split

    per_model = {}
    for (fold, seed), run_dir in run_dirs.items():
        config, model, data = _load_model_and_data(run_dir)
        per_model[f"fold{fold}-seed{seed}"] = evaluate_split(
            model, data.val, batch_size=config["data"]["eval_batch_size"], recall_at=config["evaluation"]["recall_at"]
        )
    names = sorted(set.intersection(*(set(m) for m in per_model.values())))
    summary = {
        name: {"mean": float(np.mean([m[name] for m in per_model.values()])),
               "std": float(np.std([m[name] for m in per_model.values()]))}
        for name in names
    }
    return {"per_model": per_model, "summary": summary}
