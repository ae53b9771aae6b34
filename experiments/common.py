"""Shared helpers of the experiment scripts (``experiments/<name>/run.py``).

Every script is run as ``python experiments/<name>/run.py [--smoke] [--out DIR] [--threads N]``,
writes ``results.json`` and PNG plots to ``runs/experiments/<name>/`` by default, and prints
its tables. The scripts of studies whose papers used real data also take ``--dataset`` /
``--preset``, ``--data-root`` and ``--dry-run`` (:func:`add_data_options`, :func:`on_chosen_data`). The helpers here derive the configs of an experiment from a preset with typed
functions on :func:`dataclasses.replace` (:func:`papers_regime`, :func:`finetuned`,
:func:`with_pooling`, ..., then :func:`named`, which checks the result again), train one
configuration over several seeds (with the runner of :mod:`gspdml.workflows.runner`) and collect
the test metrics, format ``mean ± std`` cells, and draw pooling-weight maps; tables are written
with :mod:`gspdml.workflows.tables`.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gspdml.config import RunConfig, load_config, validated  # noqa: E402
from gspdml.workflows import sweeps  # noqa: E402


def parser(
    name: str,
    description: str,
    *,
    smoke_help: str | None = None,
    reuse: bool = True,
    threads: int | None = 1,
    datasets: Sequence[str] = (),
) -> argparse.ArgumentParser:
    """The command line shared by every experiment script (``run_all.py`` passes ``--smoke``,
    ``--out`` and ``--threads`` to each). ``reuse`` adds ``--reuse`` for scripts that train
    with :func:`train_seeds`; ``threads=None`` leaves torch's own thread count as the default;
    ``datasets`` (:data:`REAL_DATA` names: the data of the study's paper) adds the options of
    real data (:func:`add_data_options`; the studies on synthetic data have none)."""
    p = argparse.ArgumentParser(prog=f"experiments/{name}/run.py", description=description)
    p.add_argument(
        "--smoke",
        action="store_true",
        help=smoke_help or "a tiny version that runs in seconds (used by the tests)",
    )
    p.add_argument(
        "--out", type=Path, default=ROOT / "runs" / "experiments" / name, help="output directory"
    )
    if reuse:
        p.add_argument(
            "--reuse",
            action="store_true",
            help="keep finished runs in --out whose config is unchanged (and resume stopped ones) instead of "
            "retraining them; a run of another config there is refused",
        )
    p.add_argument(
        "--threads",
        type=int,
        default=threads,
        help="torch CPU threads (one process per core is fastest on a shared 2-core machine)",
    )
    if datasets:
        add_data_options(p, datasets)
    return p


def add_data_options(p: argparse.ArgumentParser, datasets: Sequence[str]) -> None:
    """``--dataset`` (one of ``datasets``), ``--data-root``, ``--preset`` and ``--dry-run``: run a
    study on the data its paper used instead of the stand-in (:class:`DataChoice`)."""
    p.add_argument(
        "--dataset",
        choices=sorted(datasets),
        help="the paper's data instead of the stand-in: its data.dataset and pre-trained backbone "
        "replace the stand-in's (needs --data-root)",
    )
    p.add_argument(
        "--data-root",
        help="where the data is: the dataset's root, and the data.root of a pre-training recipe "
        "its backbone names (e.g. a folder holding cifar-10-batches-py/ and cifar-100-python/)",
    )
    p.add_argument(
        "--preset",
        help="a preset whose data section and model.backbone replace the stand-in's, the backbone "
        "training as the preset has it (e.g. cub-fair-c2-gsp for the CUB ablations; --data-root "
        "sets its data.dataset.root)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the runs and their configs instead of training",
    )


def setup(args: argparse.Namespace) -> Path:
    """Apply ``--threads`` (when given), create the output directory and record the data choice
    of the command line (:data:`CHOICE`)."""
    global CHOICE
    if args.threads is not None:
        if args.threads < 1:
            raise SystemExit(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    CHOICE = DataChoice(
        dataset=getattr(args, "dataset", None),
        root=getattr(args, "data_root", None),
        preset=getattr(args, "preset", None),
        dry_run=bool(getattr(args, "dry_run", False)),
        out=args.out,
    )
    if CHOICE.dataset is not None and CHOICE.root is None:
        raise SystemExit(f"--dataset {CHOICE.dataset} needs --data-root (where its files are)")
    if CHOICE.preset is not None and CHOICE.dataset is not None:
        raise SystemExit("give --dataset or --preset, not both")
    if CHOICE.root is not None and CHOICE.stand_in:
        raise SystemExit("--data-root goes with --dataset or --preset (the stand-ins need none)")
    return args.out


# The real data of the papers' studies. The stand-ins stay the default; ``--dataset`` or
# ``--preset`` replace the data and the backbone of every config an experiment derives (its loss,
# pooling, optimiser and budget stay as the script sets them), ``--dry-run`` prints the runs.


@dataclass(frozen=True)
class RealData:
    """A paper's dataset as the config sections that replace the stand-in's: ``dataset`` (the
    ``data.dataset`` spec; ``root`` from ``--data-root``) and ``backbone`` (``model.backbone``;
    a pre-training recipe in its ``weights`` gets ``--data-root`` as its ``data.root``);
    ``smoke_dataset`` (options of ``data.dataset``) and ``smoke_backbone`` for ``--smoke``."""

    source: str
    dataset: Mapping[str, Any]
    backbone: Mapping[str, Any]
    smoke_dataset: Mapping[str, Any]
    smoke_backbone: Mapping[str, Any]


#: ResNet20 pre-trained on CIFAR-100 (recipe ``resnet20-cifar100``), frozen as the stand-ins have it
CIFAR_BACKBONE = {"name": "resnet20", "weights": "resnet20-cifar100", "frozen": True}
CIFAR_SMOKE_BACKBONE = {
    "name": "small_cnn",
    "widths": [8, 16],
    "weights": "smoke-small_cnn-cifar100",
    "frozen": True,
}
REAL_DATA = {
    "collage_cifar": RealData(
        "GSP paper supplement §2.2: Cifar Collage, ResNet20 pre-trained on CIFAR-100",
        {"name": "collage_cifar"},
        CIFAR_BACKBONE,
        {"images_per_class": 4},
        CIFAR_SMOKE_BACKBONE,
    ),
    "cifar10": RealData(
        "GSP paper supplement §2.3: CIFAR-10 (all classes), ResNet20 pre-trained on CIFAR-100",
        {"name": "cifar10", "val_images_per_class": 500},
        CIFAR_BACKBONE,
        {"images_per_class": 4, "val_images_per_class": 2, "test_images_per_class": 2},
        CIFAR_SMOKE_BACKBONE,
    ),
}


@dataclass(frozen=True)
class DataChoice:
    """The data of the command line: ``dataset`` (a :data:`REAL_DATA` name) or ``preset`` (whose
    data and backbone are taken), ``root`` (``--data-root``), ``dry_run``; ``out`` holds the
    copies of pre-training recipes with their ``data.root`` set."""

    dataset: str | None = None
    root: str | None = None
    preset: str | None = None
    dry_run: bool = False
    out: Path | None = None

    @property
    def stand_in(self) -> bool:
        return self.dataset is None and self.preset is None


#: the data choice of the running script (set by :func:`setup`; the stand-in until then)
CHOICE = DataChoice()


def data_label(stand_in: str) -> str:
    """What the configs run on, for printed tables: ``stand_in`` or the chosen data."""
    if CHOICE.preset is not None:
        return f"the data of preset {CHOICE.preset}"
    return stand_in if CHOICE.dataset is None else CHOICE.dataset


def on_chosen_data(cfg: RunConfig, smoke: bool = False) -> RunConfig:
    """``cfg`` on the data of :data:`CHOICE`: unchanged for the stand-in; with ``--preset`` its
    ``data`` section, ``model.backbone`` and ``model.cache_backbone_features`` are the preset's; with ``--dataset`` they are the
    :data:`REAL_DATA` entry's (its smoke versions when ``smoke``)."""
    if CHOICE.preset is not None:
        source = preset(CHOICE.preset)
        data = source.data
        if CHOICE.root is not None:
            data = replace(data, dataset={**data.dataset, "root": CHOICE.root})
        return with_model(
            replace(cfg, data=data),
            backbone=source.model.backbone,
            cache_backbone_features=source.model.cache_backbone_features,
        )
    if CHOICE.dataset is None:
        return cfg
    real = REAL_DATA[CHOICE.dataset]
    dataset = {**real.dataset, **(real.smoke_dataset if smoke else {}), "root": CHOICE.root}
    backbone = dict(real.smoke_backbone if smoke else real.backbone)
    backbone["weights"] = recipe_on_data(backbone["weights"])
    return with_model(with_data(cfg, dataset=dataset), backbone=backbone)


def recipe_on_data(recipe: str) -> str:
    """A copy of the pre-training recipe ``recipe`` with ``data.root`` = ``--data-root``, written
    to ``--out`` under the recipe's own name (so its weights are cached as the shipped recipe's on
    that data); returns the copy's path, for ``model.backbone.weights``."""
    import yaml

    from gspdml.training.pretrain import load_recipe

    assert CHOICE.out is not None and CHOICE.root is not None
    loaded = load_recipe(recipe).on_root(CHOICE.root)
    path = CHOICE.out / f"{recipe}.yaml"
    path.write_text(yaml.safe_dump(loaded.file_content()))
    return str(path)


def train_fresh(cfg: RunConfig, out: Path):
    """Train ``cfg`` into ``out/<name>`` (replacing an older run there); returns the
    :class:`~gspdml.training.Trainer` with its trained model."""
    from gspdml.training import Trainer

    run_dir = out / cfg.name
    shutil.rmtree(run_dir, ignore_errors=True)
    trainer = Trainer.from_config(cfg, run_dir)
    trainer.fit()
    return trainer


# Configs: a preset is read once (:func:`preset`); every variant of it is derived by the typed
# functions below (each a ``dataclasses.replace``) and checked again by :func:`named`.

#: a change of a config: a function of it (e.g. :func:`finetuned`)
Change = Callable[[RunConfig], RunConfig]


@functools.cache
def preset(name: str) -> RunConfig:
    """The resolved preset ``name``, read once per process (the functions below never change a
    config in place, so its variants share it)."""
    return load_config(name)


def papers_regime(name: str, smoke: bool = False) -> RunConfig:
    """The ``demo-*`` preset ``name`` (the papers' regime: faithful collage, pre-trained backbone,
    validation early stopping and reduce-on-plateau, the same budget for every method) without a
    progress bar, on the data of the command line (:func:`on_chosen_data`); ``smoke`` shrinks
    it to seconds (:func:`smoke_sized`)."""
    cfg = preset(name)
    cfg = replace(cfg, trainer=replace(cfg.trainer, progress=False))
    if not CHOICE.stand_in:
        cfg = on_chosen_data(cfg, smoke)
        return with_steps(cfg, 2, every=2) if smoke else cfg
    return smoke_sized(cfg) if smoke else cfg


def smoke_sized(cfg: RunConfig) -> RunConfig:
    """``--smoke`` in the papers' regime: 4 images per class of the faithful collage, 2 steps and
    one validation round, a tiny pre-trained, frozen backbone (recipe
    ``smoke-small_cnn-digits``)."""
    cfg = with_steps(with_dataset(cfg, images_per_class=4), 2, every=2)
    return with_backbone(
        cfg, name="small_cnn", widths=[8, 16], weights="smoke-small_cnn-digits", frozen=True
    )


def finetuned(cfg: RunConfig) -> RunConfig:
    """The fine-tuning regime: the pre-trained backbone trains too, at a tenth of the learning
    rate (so its feature maps are no longer cached). A ``--preset``'s backbone keeps the preset's
    own regime."""
    if CHOICE.preset is not None:
        return cfg
    cfg = with_model(with_backbone(cfg, frozen=False), cache_backbone_features=False)
    return with_optimizer(cfg, lr_multipliers=replace(cfg.optimizer.lr_multipliers, backbone=0.1))


#: ``--regime``: the pre-trained backbone frozen (as the ``demo-*`` presets have it) or fine-tuned
REGIMES: dict[str, Change] = {
    "frozen": lambda cfg: cfg,
    "finetune": finetuned,
}


def with_steps(cfg: RunConfig, steps: int, *, every: int) -> RunConfig:
    """``cfg`` trained for ``steps`` steps, with a validation round every ``every`` steps."""
    return replace(
        cfg,
        schedule=replace(cfg.schedule, max_steps=steps),
        evaluation=replace(cfg.evaluation, every=every),
    )


def with_data(cfg: RunConfig, **fields: Any) -> RunConfig:
    """``cfg`` with ``fields`` of its ``data`` section replaced (e.g. ``sampler="random"``)."""
    return replace(cfg, data=replace(cfg.data, **fields))


def with_model(cfg: RunConfig, **fields: Any) -> RunConfig:
    """``cfg`` with ``fields`` of its ``model`` section replaced (e.g. ``head="local"``)."""
    return replace(cfg, model=replace(cfg.model, **fields))


def with_optimizer(cfg: RunConfig, **fields: Any) -> RunConfig:
    """``cfg`` with ``fields`` of its ``optimizer`` section replaced (e.g. ``lr=0.004``)."""
    return replace(cfg, optimizer=replace(cfg.optimizer, **fields))


def _respecified(spec: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """A component spec with ``options`` set; ``options`` that give a ``name`` are a new spec
    (the component's defaults for the rest), as a ``key={name: ...}`` override is."""
    return dict(options) if "name" in options else {**spec, **options}


def with_dataset(cfg: RunConfig, **options: Any) -> RunConfig:
    """``cfg`` with ``options`` of ``data.dataset`` set (:func:`_respecified`)."""
    return with_data(cfg, dataset=_respecified(cfg.data.dataset, options))


def with_backbone(cfg: RunConfig, **options: Any) -> RunConfig:
    """``cfg`` with ``options`` of ``model.backbone`` set (:func:`_respecified`)."""
    return with_model(cfg, backbone=_respecified(cfg.model.backbone, options))


def with_pooling(cfg: RunConfig, **options: Any) -> RunConfig:
    """``cfg`` with ``options`` of ``model.pooling`` set (:func:`_respecified`)."""
    return with_model(cfg, pooling=_respecified(cfg.model.pooling, options))


def with_loss(cfg: RunConfig, **options: Any) -> RunConfig:
    """``cfg`` with ``options`` of ``loss`` set (:func:`_respecified`)."""
    return replace(cfg, loss=_respecified(cfg.loss, options))


def named(cfg: RunConfig, name: str) -> RunConfig:
    """``cfg`` named ``name`` (its run folder), checked again from scratch
    (:func:`gspdml.config.validated`): the last step of every config an experiment trains."""
    return validated(replace(cfg, name=name))


def target_share(run_dir: Path) -> dict[str, Any]:
    """``{"target_share": ...}`` of a finished run (:func:`gspdml.workflows.demo.run_target_share`)."""
    from gspdml.workflows.demo import run_target_share

    return {"target_share": run_target_share(run_dir)}


def train_seeds(
    cfg: RunConfig,
    seeds: Sequence[int],
    out: Path,
    reuse: bool = False,
    measure: Callable[[Path], Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Train ``cfg`` once per seed into ``out/<name>/seed<k>``; returns the ``results.json`` of
    each run plus its wall time in ``seconds`` (also written to the run's ``experiment.json``).
    Without ``reuse`` every run trains from scratch; with ``reuse`` the runner's reuse rule
    applies (:mod:`gspdml.workflows.runner`: a finished run of the same config is kept, one with
    a checkpoint resumed, one of another config refused). A run whose loss turns non-finite is
    recorded as ``{"failed": message}`` instead of stopping the experiment. ``measure(run_dir)``
    adds its entries to the record of each finished run (e.g. :func:`target_share`)."""
    from gspdml.errors import TrainingError
    from gspdml.workflows.runner import run_planned, seed_plan

    if CHOICE.dry_run:
        print_planned(cfg, seeds, out)
        return []
    results = []
    for run in seed_plan(
        cfg, seeds, lambda seed: out / cfg.name / f"seed{seed}", name=lambda seed: f"seed{seed}"
    ):
        record = run.run_dir / "experiment.json"
        start = time.perf_counter()
        try:
            outcome = run_planned(run, fresh=not reuse, hint="delete it or run without --reuse")
            if outcome.status == "done" and record.is_file():
                results.append(json.loads(record.read_text()))
                continue
            result = (
                outcome.results if measure is None else {**outcome.results, **measure(run.run_dir)}
            )
        except TrainingError as error:
            result = {"failed": str(error).split(";")[0]}
            print(f"{cfg.name} seed {run.config.seed}: {result['failed']}", flush=True)
        results.append(
            {
                **result,
                "seed": run.config.seed,
                "seconds": time.perf_counter() - start,
                "run_dir": str(run.run_dir),
            }
        )
        write_json(record, results[-1])
    return results


def print_planned(cfg: RunConfig, seeds: Sequence[int], out: Path) -> None:
    """``--dry-run``: the runs of ``cfg`` (one per seed) and its config (YAML)."""
    from gspdml.config import dump_config

    folders = ", ".join(str(out / cfg.name / f"seed{seed}") for seed in seeds)
    print(f"=== would train {cfg.name}: seeds {list(seeds)} -> {folders}")
    print(dump_config(cfg), flush=True)


def metric_values(results: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    """``100 ×`` the test ``metric`` of each run that finished."""
    return [100.0 * float(r["test"][metric]) for r in results if "test" in r]


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value), as a pair."""
    stats = sweeps.mean_std(values)
    return stats["mean"], stats["std"]


def cell(entry: Mapping[str, Any], metric: str, digits: int = 2) -> str:
    """``"mean ± std"`` of a metric of a :func:`summary`, noting runs that diverged (``-``
    without runs)."""
    values, failed = entry[metric]["values"], len(entry["failed"])
    if not values:
        return "diverged" if failed else "-"  # "-": no run (a dry run)
    mean, std = mean_std(values)
    text = f"{mean:.{digits}f} ± {std:.{digits}f}"
    return text + (f" ({failed}/{failed + len(values)} diverged)" if failed else "")


def summary(results: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """JSON-friendly summary of the runs of one configuration: per metric the per-seed values
    (x100), their mean and std; and the total training time."""
    out: dict[str, Any] = {
        "seconds": sum(r["seconds"] for r in results),
        "steps": [r.get("steps") for r in results],
        "failed": {r["seed"]: r["failed"] for r in results if "failed" in r},
    }
    for metric in metrics:
        values = metric_values(results, metric)
        mean, std = mean_std(values) if values else (float("nan"), float("nan"))
        out[metric] = {"values": values, "mean": mean, "std": std}
    shares = [float(r["target_share"]) for r in results if r.get("target_share") is not None]
    if shares:
        mean, std = mean_std(shares)
        out["target_share"] = {"values": shares, "mean": mean, "std": std}
    return out


def publish(
    experiment: str, key: str, payload: Mapping[str, Any], reproduction, plots: Sequence[str] = ()
) -> Path:
    """Merge ``payload`` under ``runs[key]`` into ``experiments/<experiment>/results.json`` (the
    file the README's Reproductions table is generated from, ``scripts/readme_tables.py``),
    recompute its ``reproduction`` rows with ``reproduction(runs)`` and copy ``plots`` beside it.
    The read-merge-write holds an exclusive lock on the experiment's folder, so processes that
    publish other keys of one experiment at the same time all keep theirs. Runs on real data
    (``--dataset``/``--preset``) publish nothing: the published results are the stand-in's."""
    path = ROOT / "experiments" / experiment / "results.json"
    if not CHOICE.stand_in:
        print(f"real data: the results stay in --out; {path} keeps the stand-in's", flush=True)
        return path
    for plot in plots:
        shutil.copyfile(plot, path.parent / Path(plot).name)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        stored = json.loads(path.read_text()) if path.is_file() else {}
        runs = {**stored.get("runs", {}), key: payload}
        write_json(path, {"runs": runs, "reproduction": reproduction(runs)})
    finally:
        os.close(folder)  # releases the lock
    return path


def published(experiment: str, key: str) -> dict[str, Any]:
    """The published run ``key`` of ``experiments/<experiment>/results.json`` (what :func:`publish`
    merged there), for scripts that add to it."""
    path = ROOT / "experiments" / experiment / "results.json"
    runs = json.loads(path.read_text())["runs"] if path.is_file() else {}
    if key not in runs:
        raise SystemExit(
            f"{path} has no published run {key!r} (it has: {', '.join(runs) or 'none'})"
        )
    return runs[key]


def verdict(
    ours: Mapping[str, Any], others: Mapping[str, Mapping[str, Any]], metric: str = "map_at_r"
) -> str:
    """The rule every README verdict of "method beats the others" uses: *reproduced* when its
    mean minus one std exceeds every other mean plus one std, *partly* when its mean is the
    highest but within those bands, *not reproduced* otherwise (naming who is higher)."""
    low = ours[metric]["mean"] - ours[metric]["std"]
    higher = [
        name for name, entry in others.items() if entry[metric]["mean"] >= ours[metric]["mean"]
    ]
    if higher:
        return f"not reproduced ({', '.join(higher)} as high or higher)"
    if all(low > entry[metric]["mean"] + entry[metric]["std"] for entry in others.values()):
        return "reproduced"
    return "partly (highest mean, within one std of another)"


def write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as JSON atomically (a temporary file renamed into place)."""
    from gspdml.output_files import atomic_write_text

    atomic_write_text(path, json.dumps(payload, indent=2, default=_jsonable))


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def display_image(dataset, index: int) -> np.ndarray:
    """Item ``index`` of an :class:`~gspdml.data.arrays.ArrayDataset` as ``[H, W, C]`` in [0, 1]."""
    return dataset.images[index].permute(1, 2, 0).float().numpy() / 255.0


@torch.no_grad()
def pooling_weights(
    model: torch.nn.Module, dataset, indices: Sequence[int]
) -> list[torch.Tensor | None]:
    """The spatial pooling weights ``[h, w]`` the trained ``model`` gives each item (``None`` for
    poolings without weights, e.g. GAP, which weighs every location equally)."""
    model.eval()
    images = torch.stack([dataset[i][0] for i in indices])
    weights = model(images).weights
    return [None] * len(indices) if weights is None else list(weights.float())


def weight_map_figure(
    rows: Sequence[tuple[str, Any, Sequence[int], Sequence[torch.Tensor | None]]],
    path: Path,
    title: str,
) -> None:
    """One row of images per ``(label, dataset, indices, weights)`` with their pooling-weight
    heatmaps overlaid (:func:`gspdml.retrieval.figures.heatmap_overlay`); saved as PNG."""
    from matplotlib.figure import Figure

    from gspdml.retrieval.figures import heatmap_overlay

    columns = max(len(indices) for _, _, indices, _ in rows)
    figure = Figure(figsize=(1.3 * columns + 1.2, 1.4 * len(rows) + 0.4))
    for r, (label, dataset, indices, weights) in enumerate(rows):
        for c, (index, w) in enumerate(zip(indices, weights)):
            axes = figure.add_subplot(len(rows), columns, r * columns + c + 1)
            image = display_image(dataset, index)
            axes.imshow(
                heatmap_overlay(image, w)
                if w is not None
                else image.repeat(3 // image.shape[2], axis=2)
            )
            axes.set_xticks([])
            axes.set_yticks([])
            if c == 0:
                axes.set_ylabel(label, fontsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=54)
