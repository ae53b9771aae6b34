"""ProxyNCA++: the temperature on two moons (ProxyNCA++ paper §3.4, Fig. 3, appendix B), the temperature
sweep (ProxyNCA++ paper §3.4, Fig. 4a) and the component ablation (ProxyNCA++ paper Table 7) in the papers'
regime.

Two moons (App. B): scikit-learn ``make_moons(600, noise=0.3, random_state=0)``, a
two-layer network 2 -> 100 -> ReLU -> 2, softmax cross-entropy of ``logits / T``. Every
temperature gets the same initial weights and the same full-batch SGD budget (lr 0.05; the
appendix names no optimiser, and Adam's per-parameter step normalisation would cancel most of
the ``1/T`` gradient scale); the plot shows the decision boundaries (ProxyNCA++ paper Fig. 3: a lower
``T`` gives a more refined boundary).

ProxyNCA++ (ProxyNCA++ paper §3, Fig. 2) in the regime of ``make demo`` (preset ``demo-gmp``: faithful
collage ``collage_shared``, frozen ResNet20 pre-trained on all tile classes, 16 x 4 batches,
validation every 50 steps with reduce-on-plateau, early stopping and restore-best on the
validation classes' MAP@R, at most 300 steps) with the paper's wiring and optimiser:

* GMP, a non-affine LayerNorm on the pooled features, then the embedding layer (``model.head:
  global``, ``model.pooled_norm: layer_norm``); ``proxynca_pp`` with the assignment probability;
* the optimiser of the ProxyNCA++ code (ProxyNCA++ paper §4, Table 1: proxy lr 4e2 over base lr 4e-3):
  Adam ``eps = 1``, weight decay 0, proxies at ``lr x 1e5``; the same for every row. Two settings
  of it (:data:`OPTIMISERS`), each run over both parts: the demo's base lr 1e-3 (``--optimiser
  paper``, keys ``sweep`` and ``ablation``) and the paper's base lr 4e-3 (``--optimiser paper-lr``,
  keys ``sweep-paper-lr`` and ``ablation-paper-lr``), under which the embedding layer moves further
  in the 300 steps.

The sweep and the ablation also run in the fine-tuning regime (``--regime finetune``,
:data:`REGIMES`: the backbone trains at 0.1 x the lr, ``common.finetuned``; keys
``sweep-paper-lr-finetune`` and ``ablation-paper-lr-finetune`` under ``--optimiser paper-lr``);
the two moons have no backbone and run once.

Sweep: ``T`` in :data:`SWEEP_TEMPERATURES` (ProxyNCA++ paper §3.4 and its Fig. 4a: test R@1 peaks at ``T = 1/9`` and
drops below it: an inverted U). Ablation (Table 7): each row changes one config key of the full
ProxyNCA++ (``T = 1/9``); ``-fast`` keeps ``eps = 1`` and sets the multiplier to 1, so it ablates
only the proxy speed. A row whose config equals a sweep point (the full model is ``T = 1/9``,
``-scale`` is ``T = 1``) reuses that run. Full runs publish to
``experiments/proxynca_temperature/results.json``.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from gspdml.config import RunConfig  # noqa: E402
from gspdml.retrieval.report import read_metrics  # noqa: E402
from gspdml.workflows.tables import markdown_table  # noqa: E402

PRESET = "demo-gmp"


def proxynca_pp(cfg: RunConfig) -> RunConfig:
    """ProxyNCA++'s wiring on top of ``demo-gmp`` (GMP, ``model.head: global``): the non-affine
    LayerNorm before the embedding layer (+norm) and the loss with the assignment probability
    (+prob)."""
    cfg = common.with_model(cfg, pooled_norm="layer_norm")
    return common.with_loss(cfg, name="proxynca_pp", assignment_probability=True)


def paper_optimiser(cfg: RunConfig) -> RunConfig:
    """The optimiser of the ProxyNCA++ code (ProxyNCA++ paper §4, Table 1): Adam eps = 1, weight
    decay 0, proxies at 1e5 x the base learning rate (+fast); named here, never left to the class
    defaults."""
    cfg = common.with_optimizer(cfg, eps=1.0, weight_decay=0.0)
    return common.with_loss(cfg, lr_multiplier=100000.0)


#: the settings of the paper's optimiser, each over every row of both parts: name -> (fields of the
#: ``optimizer`` section on top of :func:`paper_optimiser`, label). With eps = 1 an Adam step is
#: about lr x gradient, so the base lr decides how far the embedding layer moves in the budget;
#: 4e-3 is ProxyNCA++ paper Table 1's base lr.
OPTIMISERS = {
    "paper": ({}, "paper's optimiser, base lr 1e-3"),
    "paper-lr": ({"lr": 0.004}, "paper's optimiser, paper's base lr 4e-3"),
}
#: the backbone regimes of the sweep (``common.REGIMES``): name -> label. ``frozen`` changes
#: nothing, so its configs (and run directories) are those of the frozen-only script; ``finetune``
#: trains the pre-trained backbone too, at 0.1 x the lr (``common.finetuned``)
REGIMES = {"frozen": "frozen ResNet20", "finetune": "ResNet20 fine-tuned at 0.1x the lr"}
FULL_TEMPERATURE = 1 / 9
SWEEP_TEMPERATURES = (1 / 27, 1 / 9, 1 / 3, 1.0, 2.0)
#: Table 7 row -> (the change that removes the component, that change as the table prints it, what
#: it removes, the paper's R@1 change)
ABLATION = {
    "ProxyNCA++": (
        lambda cfg: cfg,
        "",
        ("nothing: T = 1/9, GMP, LayerNorm, 16 x 4 batches, proxies x1e5, assignment probability"),
        0.0,
    ),
    "-scale": (
        lambda cfg: common.with_loss(cfg, temperature=1.0),
        "loss.temperature=1.0",
        "T = 1",
        -10.8,
    ),
    "-max": (
        lambda cfg: common.with_pooling(cfg, name="gap"),
        "model.pooling={name: gap}",
        "global average pooling",
        -3.2,
    ),
    "-norm": (
        lambda cfg: common.with_model(cfg, pooled_norm=None),
        "model.pooled_norm=null",
        "no LayerNorm before the embedding layer",
        -2.6,
    ),
    "-cbs": (
        lambda cfg: common.with_data(cfg, sampler="random"),
        "data.sampler=random",
        "random batches of 64 images",
        -2.6,
    ),
    "-fast": (
        lambda cfg: common.with_loss(cfg, lr_multiplier=1.0),
        "loss.lr_multiplier=1.0",
        "proxies at the base learning rate (Adam eps stays 1)",
        -1.9,
    ),
    "-prob": (
        lambda cfg: common.with_loss(cfg, assignment_probability=False),
        "loss.assignment_probability=false",
        "ProxyNCA's positive-excluded denominator (ProxyNCA++ paper Eq. 3)",
        -1.1,
    ),
}
PAPER_FULL_R1 = 72.2  # ProxyNCA++ paper Table 7, CUB200, ResNet-50, 2048-D
METRICS = ("recall_at_1", "recall_at_2", "recall_at_4", "recall_at_8", "map_at_r")
TEMPERATURES = (1.0, 1 / 3, 1 / 9, 1 / 27)
PARTS = ("moons", "sweep", "ablation")
FULL = dict(seeds=(0, 1, 2), temperatures=SWEEP_TEMPERATURES, rows=tuple(ABLATION), moon_steps=2000)
SMOKE = dict(
    seeds=(0,), temperatures=(1 / 9, 1.0), rows=("ProxyNCA++", "-scale", "-fast"), moon_steps=20
)


def moons_classifier(temperature: float, steps: int, x: torch.Tensor, y: torch.Tensor) -> nn.Module:
    """The appendix-B network trained with ``CE(logits / T)``: full batch, SGD (lr 0.05), the
    same initial weights for every temperature."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 100), nn.ReLU(), nn.Linear(100, 2))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(net(x) / temperature, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return net


def two_moons(out: Path, steps: int) -> dict:
    from matplotlib.figure import Figure
    from sklearn.datasets import make_moons

    points, labels = make_moons(n_samples=600, noise=0.3, random_state=0)
    x, y = torch.tensor(points, dtype=torch.float32), torch.tensor(labels)
    lo, hi = points.min(0) - 0.5, points.max(0) + 0.5
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 200), np.linspace(lo[1], hi[1], 200))
    grid = torch.tensor(np.stack([gx.ravel(), gy.ravel()], 1), dtype=torch.float32)
    figure = Figure(figsize=(3.0 * len(TEMPERATURES), 3.0))
    accuracy = {}
    for i, temperature in enumerate(TEMPERATURES):
        net = moons_classifier(temperature, steps, x, y)
        with torch.no_grad():
            accuracy[temperature_label(temperature)] = float((net(x).argmax(1) == y).float().mean())
            probability = torch.softmax(net(grid) / temperature, 1)[:, 1].reshape(gx.shape).numpy()
        axes = figure.add_subplot(1, len(TEMPERATURES), i + 1)
        axes.contourf(gx, gy, probability, levels=20, cmap="RdBu", alpha=0.8)
        axes.contour(gx, gy, probability, levels=[0.5], colors="k", linewidths=1)
        axes.scatter(
            points[:, 0], points[:, 1], c=labels, cmap="RdBu", edgecolors="k", s=8, linewidths=0.3
        )
        axes.set_title(
            f"T = {temperature_label(temperature)}  (train acc {100 * accuracy[temperature_label(temperature)]:.1f}%)",
            fontsize=8,
        )
        axes.set_xticks([])
        axes.set_yticks([])
    figure.tight_layout()
    path = out / "two_moons.png"
    figure.savefig(path, dpi=70)
    return {"steps": steps, "train_accuracy": accuracy, "plot": str(path)}


def temperature_label(temperature: float) -> str:
    """``1/9`` for temperatures below 1, ``2`` otherwise."""
    return f"1/{1 / temperature:.0f}" if temperature < 1 else f"{temperature:g}"


def part_key(part: str, optimiser: str, regime: str = "frozen") -> str:
    """``sweep`` / ``ablation`` for the paper's optimiser at lr 1e-3, ``<part>-<optimiser>`` otherwise,
    then ``-finetune`` in the fine-tuning regime; also the suffix of run names and plots."""
    key = part if optimiser == "paper" else f"{part}-{optimiser}"
    return key if regime == "frozen" else f"{key}-{regime}"


def proxynca_config(
    change: common.Change,
    *,
    name: str,
    smoke: bool,
    optimiser: str = "paper",
    regime: str = "frozen",
) -> RunConfig:
    """ProxyNCA++ with the paper's optimiser (setting ``optimiser``) in the papers' regime with the
    backbone ``regime``, then ``change``."""
    cfg = paper_optimiser(proxynca_pp(common.papers_regime(PRESET, smoke)))
    cfg = common.REGIMES[regime](common.with_optimizer(cfg, **OPTIMISERS[optimiser][0]))
    cfg = change(common.with_loss(cfg, temperature=FULL_TEMPERATURE))
    return common.named(cfg, part_key(name, optimiser, regime))


def sweep_config(
    temperature: float, smoke: bool = False, optimiser: str = "paper", regime: str = "frozen"
) -> RunConfig:
    """The sweep point ``temperature``: the full ProxyNCA++ with only ``loss.temperature`` changed."""
    return proxynca_config(
        functools.partial(common.with_loss, temperature=temperature),
        name="T" + temperature_label(temperature).replace("/", "-"),
        smoke=smoke,
        optimiser=optimiser,
        regime=regime,
    )


def ablation_config(
    row: str, smoke: bool = False, optimiser: str = "paper", regime: str = "frozen"
) -> RunConfig:
    """The Table 7 row ``row``; a row equal to a sweep point is that point (same name, same run)."""
    cfg = proxynca_config(
        ABLATION[row][0],
        name="full" if row == "ProxyNCA++" else f"no-{row[1:]}",
        smoke=smoke,
        optimiser=optimiser,
        regime=regime,
    )
    for temperature in SWEEP_TEMPERATURES:
        twin = sweep_config(temperature, smoke, optimiser, regime)
        if dataclasses.replace(cfg, name=twin.name) == twin:
            return twin
    return cfg


def validation_gain(run_dir: Path) -> dict:
    """First and best validation MAP@R of a run: did the embedding learn beyond its first round?"""
    values = [r["map_at_r"] for r in read_metrics(run_dir) if r.get("split") == "val"]
    return {"val_first": values[0], "val_best": max(values)}


def summarize(runs: list[dict]) -> dict:
    """:func:`common.summary` plus the validation MAP@R gain (best minus first round, x100)."""
    entry = common.summary(runs, METRICS)
    gains = [100.0 * (r["val_best"] - r["val_first"]) for r in runs if "val_best" in r]
    mean, std = common.mean_std(gains) if gains else (float("nan"), float("nan"))
    entry["val_gain"] = {"values": gains, "mean": mean, "std": std}
    return entry


class Trainings:
    """Each config trained once per process (over the seeds), so that shared rows reuse their run."""

    def __init__(self, seeds, out: Path, reuse: bool):
        self.seeds, self.out, self.reuse, self.done = seeds, out, reuse, {}

    def __call__(self, cfg: RunConfig) -> dict:
        if cfg.name not in self.done:
            runs = common.train_seeds(
                cfg, self.seeds, self.out, reuse=self.reuse, measure=validation_gain
            )
            self.done[cfg.name] = summarize(runs)
            print(
                f"{cfg.name:10s} R@1 {common.cell(self.done[cfg.name], 'recall_at_1')}  "
                f"MAP@R {common.cell(self.done[cfg.name], 'map_at_r')}  ({self.done[cfg.name]['seconds']:.0f} s)",
                flush=True,
            )
        return self.done[cfg.name]


def regime_plan(cfg: RunConfig, seeds) -> dict:
    optimizer = {key: getattr(cfg.optimizer, key) for key in ("lr", "eps", "weight_decay")}
    return {
        "seeds": list(seeds),
        "max_steps": cfg.schedule.max_steps,
        "eval_every": cfg.evaluation.every,
        "patience": cfg.evaluation.patience,
        "optimizer": optimizer,
        "lr_multiplier": cfg.loss["lr_multiplier"],
        "backbone": {
            "frozen": cfg.model.backbone["frozen"],
            "lr_multiplier": cfg.optimizer.lr_multipliers.backbone,
        },
    }


def sweep_plot_name(optimiser: str, regime: str = "frozen") -> str:
    return part_key("temperature_sweep", optimiser, regime) + ".png"


def temperature_sweep(
    plan: dict, train: Trainings, smoke: bool, out: Path, optimiser: str, regime: str = "frozen"
) -> dict:
    """Train every temperature over the seeds; R@1 / MAP@R per T, the plot of both against T."""
    table = {
        temperature_label(t): train(sweep_config(t, smoke, optimiser, regime))
        for t in plan["temperatures"]
    }
    rows = [
        [t, common.cell(e, "recall_at_1"), common.cell(e, "map_at_r"), common.cell(e, "val_gain")]
        for t, e in table.items()
    ]
    text = markdown_table(
        ["T", "test R@1", "test MAP@R", "val MAP@R gain (best - first round)"], rows
    )
    sweep_plot(
        plan["temperatures"],
        table,
        out / sweep_plot_name(optimiser, regime),
        f"{REGIMES[regime]},\n{OPTIMISERS[optimiser][1]}",
    )
    first = sweep_config(plan["temperatures"][0], smoke, optimiser, regime)
    return {
        "plan": {**regime_plan(first, plan["seeds"]), "temperatures": list(table)},
        "results": table,
        "table": text,
        "seconds": sum(e["seconds"] for e in table.values()),
    }


def sweep_plot(temperatures, table: dict, path: Path, label: str) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.0, 3.0))
    for i, metric in enumerate(("recall_at_1", "map_at_r")):
        axes = figure.add_subplot(1, 2, i + 1)
        means = np.array([e[metric]["mean"] for e in table.values()])
        stds = np.array([e[metric]["std"] for e in table.values()])
        axes.plot(temperatures, means, marker="o")
        axes.fill_between(temperatures, means - stds, means + stds, alpha=0.3)
        axes.set_xscale("log")
        axes.set_xticks(temperatures, list(table))
        axes.set_xlabel("temperature T")
        axes.set_title(
            f"test {'R@1' if metric == 'recall_at_1' else 'MAP@R'} (mean ± std over seeds)\n{label}",
            fontsize=8,
        )
    figure.tight_layout()
    figure.savefig(path, dpi=70)


def ablation(
    plan: dict, train: Trainings, smoke: bool, optimiser: str, regime: str = "frozen"
) -> dict:
    """Table 7 analogue: each row's R@1 and MAP@R and their change from the full ProxyNCA++.
    Rows that are not sweep points train first (a parallel sweep process may still be training those)."""

    def config(row):
        return ablation_config(row, smoke, optimiser, regime)

    sweep_names = {sweep_config(t, smoke, optimiser, regime).name for t in SWEEP_TEMPERATURES}
    for row in sorted(plan["rows"], key=lambda r: config(r).name in sweep_names):
        train(config(row))
    table = {row: train(config(row)) for row in plan["rows"]}
    full = table["ProxyNCA++"]
    rows = [
        [
            row,
            f"`{ABLATION[row][1]}`" if ABLATION[row][1] else "-",
            common.cell(e, "recall_at_1"),
            f"{e['recall_at_1']['mean'] - full['recall_at_1']['mean']:+.2f}",
            f"{ABLATION[row][3]:+.1f}",
            common.cell(e, "map_at_r"),
            f"{e['map_at_r']['mean'] - full['map_at_r']['mean']:+.2f}",
            common.cell(e, "val_gain"),
        ]
        for row, e in table.items()
    ]
    text = markdown_table(
        [
            "row",
            "change",
            "test R@1",
            "ΔR@1",
            "paper ΔR@1 (CUB)",
            "test MAP@R",
            "ΔMAP@R",
            "val MAP@R gain",
        ],
        rows,
    )
    return {
        "plan": {**regime_plan(config("ProxyNCA++"), plan["seeds"]), "rows": list(table)},
        "results": table,
        "table": text,
        "seconds": sum(e["seconds"] for e in table.values()),
        "removed": {row: ABLATION[row][2] for row in table},
    }


def inverted_u(table: dict, metric: str) -> str:
    """Verdict on the inverted U (``table`` ordered by T): *not reproduced* when the best mean is
    at the lowest or highest T; otherwise :func:`common.verdict` of the peak against the two ends
    (*reproduced*: the peak's mean - std above each end's mean + std)."""
    ends = (next(iter(table)), list(table)[-1])
    best = max(table, key=lambda t: table[t][metric]["mean"])
    if best in ends:
        return f"not reproduced (peak at the end, T = {best})"
    return f"{common.verdict(table[best], {f'T = {t}': table[t] for t in ends}, metric)}; peak at T = {best}"


def largest_drop(table: dict, metric: str) -> str:
    """Verdict on "removing low temperature scaling costs the most": *not reproduced* when another
    row loses more; otherwise :func:`common.verdict` of the full model against ``-scale``."""
    full = table["ProxyNCA++"]
    deltas = {
        row: e[metric]["mean"] - full[metric]["mean"]
        for row, e in table.items()
        if row != "ProxyNCA++"
    }
    largest = min(deltas, key=deltas.get)
    if largest != "-scale":
        return f"not reproduced (largest drop {largest} {deltas[largest]:+.2f}, -scale {deltas['-scale']:+.2f})"
    return common.verdict(full, {"-scale": table["-scale"]}, metric)


def every_component_helps(table: dict, metric: str) -> str:
    """Verdict on "every component helps": the rows the full model beats by more than one std each
    (:func:`common.verdict`); *reproduced* when all, *partly* when some, *not reproduced* when none."""
    full = table["ProxyNCA++"]
    rows = [row for row in table if row != "ProxyNCA++"]
    drops = [row for row in rows if common.verdict(full, {row: table[row]}, metric) == "reproduced"]
    if len(drops) == len(rows):
        return "reproduced"
    return f"{'partly' if drops else 'not reproduced'} (a drop beyond one std in {len(drops)}/{len(rows)} rows: {', '.join(drops) or 'none'})"


def moons_verdict(accuracy: dict) -> str:
    """Training accuracy must not fall as T falls (``accuracy`` ordered from T = 1 down) and must rise overall."""
    values = list(accuracy.values())
    if all(b >= a for a, b in zip(values, values[1:])) and values[-1] > values[0]:
        return "reproduced"
    return "not reproduced (training accuracy does not rise as T falls)"


def reproduction(runs: dict) -> list[dict]:
    """README rows of every published part (two moons, sweep and ablation per optimiser setting,
    then the fine-tuned sweeps)."""
    rows = []
    if "two-moons" in runs:
        accuracy = runs["two-moons"]["train_accuracy"]
        rows.append(
            {
                "experiment": "ProxyNCA++ temperature on two moons (ProxyNCA++ paper Fig. 3)",
                "claim": "a lower T gives a more refined decision boundary",
                "paper": "figure (qualitative)",
                "ours": "training accuracy "
                + ", ".join(f"T={t}: {100 * a:.1f}%" for t, a in accuracy.items()),
                "verdict": moons_verdict(accuracy),
            }
        )
    for regime in REGIMES:
        for optimiser in OPTIMISERS:
            rows += regime_rows(runs, optimiser, regime)
    return rows


def sweep_rows(runs: dict, optimiser: str, regime: str) -> list[dict]:
    """The sweep's README row of one optimiser setting and backbone regime (none when unpublished)."""
    key = part_key("sweep", optimiser, regime)
    if key not in runs:
        return []
    table = runs[key]["results"]
    setting = f"collage_shared, {REGIMES[regime]}, {OPTIMISERS[optimiser][1]}"
    return [
        {
            "experiment": f"ProxyNCA++ temperature sweep, {setting} (ProxyNCA++ paper §3.4, Fig. 4a)",
            "claim": "test R@1 peaks at an intermediate low temperature (inverted U)",
            "paper": "best T = 1/9 on CUB200",
            "ours": "; ".join(
                f"T={t}: R@1 {common.cell(e, 'recall_at_1')}, MAP@R {common.cell(e, 'map_at_r')}, "
                f"val gain {common.cell(e, 'val_gain')}"
                for t, e in table.items()
            ),
            "verdict": f"R@1: {inverted_u(table, 'recall_at_1')}; MAP@R: {inverted_u(table, 'map_at_r')}",
        }
    ]


def regime_rows(runs: dict, optimiser: str, regime: str) -> list[dict]:
    """The sweep's and the ablation's README rows of one optimiser setting and backbone regime
    (none when unpublished)."""
    rows = sweep_rows(runs, optimiser, regime)
    setting = f"collage_shared, {REGIMES[regime]}, {OPTIMISERS[optimiser][1]}"
    if part_key("ablation", optimiser, regime) in runs:
        table = runs[part_key("ablation", optimiser, regime)]["results"]
        full = table["ProxyNCA++"]
        deltas = "; ".join(
            f"{row} {e['recall_at_1']['mean'] - full['recall_at_1']['mean']:+.2f} R@1 / "
            f"{e['map_at_r']['mean'] - full['map_at_r']['mean']:+.2f} MAP@R"
            for row, e in table.items()
            if row != "ProxyNCA++"
        )
        paper = f"R@1 {PAPER_FULL_R1}; " + ", ".join(
            f"{row} {ABLATION[row][3]:+.1f}" for row in table if row != "ProxyNCA++"
        )
        ours = f"full R@1 {common.cell(full, 'recall_at_1')}, MAP@R {common.cell(full, 'map_at_r')}; {deltas}"
        experiment = f"ProxyNCA++ ablation, {setting} (ProxyNCA++ paper Table 7)"
        rows.append(
            {
                "experiment": experiment + ": -scale",
                "claim": "removing low temperature scaling costs the most R@1",
                "paper": paper,
                "ours": ours,
                "verdict": f"R@1: {largest_drop(table, 'recall_at_1')}; MAP@R: {largest_drop(table, 'map_at_r')}",
            }
        )
        rows.append(
            {
                "experiment": experiment + ": every component",
                "claim": "removing any component lowers R@1",
                "paper": paper,
                "ours": ours,
                "verdict": f"R@1: {every_component_helps(table, 'recall_at_1')}; MAP@R: {every_component_helps(table, 'map_at_r')}",
            }
        )
    return rows


def select_temperatures(plan: dict, labels) -> tuple[dict, bool]:
    """``plan`` with only the sweep points labelled ``labels`` (all when ``None``) and whether that
    leaves some of them out (a partial sweep, which is not published)."""
    if labels is None:
        return plan, False
    kept = tuple(t for t in plan["temperatures"] if temperature_label(t) in labels)
    return {**plan, "temperatures": kept}, kept != plan["temperatures"]


def print_planned(plan: dict, args, out: Path) -> None:
    """``--dry-run``: the sweep and ablation runs of every chosen optimiser setting, each once
    (the moons have no data to choose)."""
    configs = {}
    for optimiser in args.optimiser:
        if "sweep" in args.parts:
            for t in plan["temperatures"]:
                cfg = sweep_config(t, args.smoke, optimiser, args.regime)
                configs[cfg.name] = cfg
        if "ablation" in args.parts:
            for row in plan["rows"]:
                cfg = ablation_config(row, args.smoke, optimiser, args.regime)
                configs[cfg.name] = cfg
    for cfg in configs.values():
        common.print_planned(cfg, plan["seeds"], out)


def main(argv=None) -> dict:
    parser = common.parser(
        "proxynca_temperature", __doc__.splitlines()[0], datasets=("collage_cifar",)
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        help="which parts to run (a sweep and an ablation process can run side by side with --reuse); "
        "default: all three (frozen), the sweep and the ablation (finetune)",
    )
    parser.add_argument(
        "--optimiser",
        nargs="+",
        choices=list(OPTIMISERS),
        default=list(OPTIMISERS),
        help="settings of the paper's optimiser to run the sweep and the ablation with (keys sweep[-<setting>], ablation[-<setting>])",
    )
    parser.add_argument(
        "--regime",
        choices=list(REGIMES),
        default="frozen",
        help="backbone regime of the sweep and the ablation (keys <part>[-<setting>]-finetune for finetune); the moons are frozen-only",
    )
    parser.add_argument(
        "--temperatures",
        nargs="+",
        choices=[temperature_label(t) for t in SWEEP_TEMPERATURES],
        help="train only these sweep points, to split a sweep across processes with --reuse; a run with a partial sweep publishes nothing",
    )
    args = parser.parse_args(argv)
    args.parts = args.parts or (list(PARTS) if args.regime == "frozen" else ["sweep", "ablation"])
    if args.regime != "frozen" and "moons" in args.parts:
        parser.error(
            f"--regime {args.regime}: the two moons have no backbone (--parts sweep ablation)"
        )
    out = common.setup(args)
    plan, partial = select_temperatures(SMOKE if args.smoke else FULL, args.temperatures)
    if args.dry_run:
        print_planned(plan, args, out)
        return {"dry_run": True}
    train = Trainings(plan["seeds"], out, args.reuse)
    payloads, plots = {}, {"two-moons": [str(out / "two_moons.png")]}
    if "moons" in args.parts:
        start = time.perf_counter()
        moons = two_moons(out, plan["moon_steps"])
        rows = [
            ["training accuracy (%)", *(f"{100 * a:.1f}" for a in moons["train_accuracy"].values())]
        ]
        payloads["two-moons"] = {
            **moons,
            "plan": {"seeds": [0], "steps": plan["moon_steps"]},
            "table": markdown_table(["T", *moons["train_accuracy"]], rows),
            "seconds": time.perf_counter() - start,
        }
    for optimiser in args.optimiser:
        if "sweep" in args.parts:
            payloads[part_key("sweep", optimiser, args.regime)] = temperature_sweep(
                plan, train, args.smoke, out, optimiser, args.regime
            )
            plots[part_key("sweep", optimiser, args.regime)] = [
                str(out / sweep_plot_name(optimiser, args.regime))
            ]
        if "ablation" in args.parts:
            payloads[part_key("ablation", optimiser, args.regime)] = ablation(
                plan, train, args.smoke, optimiser, args.regime
            )
    for key, payload in payloads.items():
        payload["threads"] = args.threads
        print(f"\n{key}, seeds {payload['plan']['seeds']}\n{payload['table']}")
        if not (args.smoke or partial):
            common.publish(
                "proxynca_temperature", key, payload, reproduction, plots=plots.get(key, [])
            )
    common.write_json(
        out / "results.json", {"runs": payloads, "reproduction": reproduction(payloads)}
    )
    return payloads


if __name__ == "__main__":
    main()
