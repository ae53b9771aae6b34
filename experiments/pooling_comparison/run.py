"""Pooling alternatives in the GSP paper's Cifar Collage regime (GSP paper, supplement §1.4 and
Table 4; setting of supplement §2.2).

Every pooling is trained on the faithful collage ``collage_shared`` (digit-pair tiles; shared
background classes in the targets' format; classes and images disjoint across splits) from the
``demo-*`` presets: a ResNet20 pre-trained on all 100 tile classes (``gspdml pretrain
resnet20-digits``), frozen (``--regime frozen``, default) or fine-tuned at a tenth of the
learning rate (``--regime finetune``); the baselines pool the backbone map and then project to
128-D (the authors' wiring); GSP (m = 128, μ = 0.2, ε = 10) follows the authors' TF code, a
bias-free 1x1 embedding convolution before the transport. Every method has the same budget and
selection rule (Adam 1e-3, halve on a 5-round plateau, early stopping and restore-best on the
validation classes' MAP@R, 16 × 4 batches, same seeds). Prints the 128-D MAP@R table in the
layout of Table 4 (mean ± std over seeds) with each method's share of pooling weight on the
target tile of the test collages, next to the paper's Cifar-Collage column; writes
``results.json`` and a bar plot, and (full runs) publishes the summary to
``experiments/pooling_comparison/results.json``; with ``--merge`` the poolings of the run join
the published run of the same key (same seeds and losses) instead of replacing it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402

from gspdml.config import RunConfig  # noqa: E402
from gspdml.workflows.tables import markdown_table  # noqa: E402

#: name in the table: (pooling spec, Table 4 Cifar-Collage MAP@R C2, PNCA);
#: GSP is the preset demo-gsp itself (spec None)
POOLINGS = {
    "CBAM": ({"name": "cbam"}, 7.87, 10.99),
    "CroW": ({"name": "crow"}, 10.09, 11.48),
    "DeLF": ({"name": "delf"}, 11.44, 24.83),
    "GeMax": ({"name": "gemax"}, 7.04, 7.83),
    "GeMean": ({"name": "gem"}, 10.97, 10.60),
    "GSoP": ({"name": "gsop"}, 11.15, 17.73),
    "OTP": ({"name": "otp", "prototypes": 8, "dim": 16}, 7.02, 11.55),
    "SOLAR": ({"name": "solar"}, 17.30, 20.36),
    "T-SMK": ({"name": "t_smk"}, 9.21, 13.15),
    "VLAD": ({"name": "netvlad", "clusters": 8, "dim": 16}, 21.73, 19.68),
    "WELDON": ({"name": "weldon"}, 13.81, 20.38),
    "LSE": ({"name": "lse"}, None, None),
    "k-max": ({"name": "kmax"}, None, None),
    "SimPool": ({"name": "simpool"}, None, None),
    "GAP": ({"name": "gap"}, 8.09, 10.68),
    "GMP": ({"name": "gmp"}, 9.53, 11.25),
    "GMP+GAP": ({"name": "gap_gmp"}, 10.01, 11.85),
    "GSP": (None, 22.68, 27.61),
}
#: the ensemble poolings at 8 prototypes x 16-D = 128-D, their ensemble being the embedding (the
#: paper's 128-D version, supplement §1.4; as the cub-fair-*-vlad-8x16 / -otp-8x16 presets)
ENSEMBLES = ("OTP", "VLAD")
LOSSES = {
    "C2": {"name": "c2", "pos_margin": 0.0, "neg_margin": 0.5},
    "ProxyNCA++": {"name": "proxynca_pp", "lr_multiplier": 100},
}
#: the backbones, as fields of the ``model`` section: the pre-trained ResNet20 of the demo presets,
#: or the real ImageNet EfficientNet-Lite0 (preset collage-efficientnet-lite0; ~10 s per 64-image
#: batch at 256 px on one CPU core, so each collage's map is computed once and cached for every run
#: of the process: frozen regime only)
BACKBONES = {
    "resnet20": {},
    "efficientnet_lite0": {
        "backbone": {"name": "efficientnet_lite0", "input_size": 256, "frozen": True},
        "cache_backbone_features": True,
    },
}
#: the glyphs of the faithful collage (``--source``): (the ``data.dataset`` options, the ResNet20's
#: ``model.backbone`` options). The embedded digits, or Fashion-MNIST items (28-px tiles of two
#: 14-px items, 56-px collages; the ResNet20 then loads the recipe resnet20-fashion)
SOURCES = {
    "digits": ({}, {}),
    "fashion": (
        {"name": "collage_shared", "source": "fashion", "tile_size": 28},
        {"weights": "resnet20-fashion"},
    ),
}
METRICS = ("map_at_r", "precision_at_1")
FULL = dict(seeds=(0, 1, 2), poolings=("GAP", "GMP", "GMP+GAP", "GeMean", "GSP"), losses=("C2",))
SMOKE = dict(seeds=(0,), poolings=("GAP", "GSP"), losses=("C2",))


def bar_plot(out: Path, table: dict, losses, key: str) -> Path:
    from matplotlib.figure import Figure

    names = list(table)
    figure = Figure(figsize=(6.0, 3.0))
    axes = figure.add_subplot(1, 1, 1)
    width = 0.8 / len(losses)
    for k, loss in enumerate(losses):
        axes.bar(
            [i + width * k for i in range(len(names))],
            [table[n][loss]["map_at_r"]["mean"] for n in names],
            width,
            yerr=[table[n][loss]["map_at_r"]["std"] for n in names],
            label=loss,
            capsize=2,
        )
    axes.set_xticks(
        [i + 0.4 - width / 2 for i in range(len(names))], names, rotation=45, fontsize=7
    )
    axes.set_ylabel("test MAP@R (%)")
    axes.legend(fontsize=7)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    path = out / f"map_at_r-{key}.png"
    figure.savefig(path, dpi=80)
    return path


def paper(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def share(entry) -> str:
    stats = entry.get("target_share")
    return "-" if stats is None else f"{stats['mean']:.2f} ± {stats['std']:.2f}"


def run_key(regime: str, backbone: str = "resnet20", source: str = "digits") -> str:
    """The published key of a run of the script, e.g. ``frozen``, ``efficientnet_lite0-frozen-fashion``."""
    return "-".join(
        [
            *([backbone] if backbone != "resnet20" else []),
            regime,
            *([source] if source != "digits" else []),
        ]
    )


def run_config(
    name: str,
    loss: str,
    regime: str,
    smoke: bool,
    backbone: str = "resnet20",
    source: str = "digits",
) -> RunConfig:
    spec = POOLINGS[name][0]
    dataset, resnet_weights = SOURCES[source]
    cfg = common.papers_regime("demo-gsp" if spec is None else "demo-base", smoke)
    cfg = common.with_loss(cfg, **LOSSES[loss])
    if not smoke:
        cfg = common.with_model(common.with_dataset(cfg, **dataset), **BACKBONES[backbone])
        cfg = common.with_backbone(cfg, **resnet_weights) if backbone == "resnet20" else cfg
    cfg = common.REGIMES[regime](cfg)
    cfg = common.with_model(cfg, embedding_dim=None) if name in ENSEMBLES else cfg
    slug = (
        f"{run_key(regime, backbone, source)}-{name}-{loss}".lower()
        .replace(" ", "")
        .replace("+", "p")
    )
    return common.named(common.with_pooling(cfg, **spec) if spec else cfg, slug)


def results_table(table: dict, losses, regime: str) -> str:
    """The Table 4 layout: per pooling its MAP@R and target-tile weight per loss, next to the
    paper's Cifar-Collage values."""
    header = [
        "pooling (128D MAP@R)",
        *(f"{regime} {loss}" for loss in losses),
        *(f"target-tile weight {loss}" for loss in losses),
        *(f"paper Cifar Collage {loss}" for loss in losses),
    ]
    rows = [
        [
            name,
            *(common.cell(table[name][loss], "map_at_r") for loss in losses),
            *(share(table[name][loss]) for loss in losses),
            *(paper(POOLINGS[name][1 if loss == "C2" else 2]) for loss in losses),
        ]
        for name in table
    ]
    return markdown_table(header, rows)


def merged(key: str, payload: dict) -> dict:
    """``payload``'s poolings put into the published run ``key`` (which must have the same seeds
    and losses) in place of the same poolings there, in the order of :data:`POOLINGS`; the table
    is rebuilt, the times add up and ``plan.merged`` lists the poolings merged in."""
    stored = common.published("pooling_comparison", key)
    same = ("seeds", "losses")
    if [stored["plan"][k] for k in same] != [payload["plan"][k] for k in same]:
        raise SystemExit(
            f"--merge: the published run {key!r} has seeds {stored['plan']['seeds']} and losses "
            f"{stored['plan']['losses']}; run with those (--seeds, --losses)"
        )
    results = {**stored["results"], **payload["results"]}
    results = {name: results[name] for name in POOLINGS if name in results}
    plan = {
        **stored["plan"],
        "poolings": list(results),
        "merged": stored["plan"].get("merged", []) + payload["plan"]["poolings"],
    }
    return {
        **stored,
        "plan": plan,
        "results": results,
        "table": results_table(results, plan["losses"], stored["regime"]),
        "seconds": stored["seconds"] + payload["seconds"],
    }


def reproduction(runs: dict) -> list[dict]:
    """README rows: per regime and loss, GSP against the other poolings of the run."""
    rows = []
    for payload in runs.values():
        for loss in payload["plan"]["losses"]:
            table = {name: losses[loss] for name, losses in payload["results"].items()}
            if "GSP" not in table or len(table) < 2:
                continue
            others = {n: e for n, e in table.items() if n != "GSP"}
            column = 1 if loss == "C2" else 2
            ours = "; ".join(f"{n} {common.cell(e, 'map_at_r')}" for n, e in table.items())
            rows.append(
                {
                    "experiment": f"Pooling comparison, {loss}, {payload['regime']} {payload.get('backbone', 'resnet20')}, "
                    f"{payload.get('source', 'digits')} collage (GSP paper Table 4)",
                    "claim": f"GSP beats every other pooling on Cifar Collage (compared here: {', '.join(others)})",
                    "paper": "; ".join(f"{n} {paper(POOLINGS[n][column])}" for n in table),
                    "ours": f"{ours}; GSP target-tile weight {share(table['GSP'])} (GAP 0.25)",
                    "verdict": common.verdict(table["GSP"], others),
                }
            )
    return rows


def main(argv=None) -> dict:
    parser = common.parser(
        "pooling_comparison", __doc__.splitlines()[0], datasets=("collage_cifar",)
    )
    parser.add_argument(
        "--regime", choices=tuple(common.REGIMES), default="frozen", help="backbone regime"
    )
    parser.add_argument(
        "--poolings",
        nargs="+",
        choices=tuple(POOLINGS),
        help="poolings to run (default: the Table 4 core)",
    )
    parser.add_argument(
        "--losses", nargs="+", choices=tuple(LOSSES), help="losses to run (default: C2)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, help="seeds (default 0 1 2)")
    parser.add_argument(
        "--backbone", choices=tuple(BACKBONES), default="resnet20", help="pre-trained backbone"
    )
    parser.add_argument(
        "--source", choices=tuple(SOURCES), default="digits", help="glyphs of the collage"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="replace only these poolings in the published run of this key (same seeds and "
        "losses), keeping its others",
    )
    args = parser.parse_args(argv)
    out = common.setup(args)
    if args.merge and (args.smoke or not common.CHOICE.stand_in):
        parser.error("--merge goes with the full stand-in runs (they are what is published)")
    if args.source != "digits" and not common.CHOICE.stand_in:
        parser.error(
            "--source chooses the stand-in's glyphs; it does not go with --dataset/--preset"
        )
    plan = dict(SMOKE if args.smoke else FULL)
    key = run_key(args.regime, args.backbone, args.source)
    plan.update(
        {
            k: tuple(v)
            for k, v in (
                ("poolings", args.poolings),
                ("losses", args.losses),
                ("seeds", args.seeds),
            )
            if v
        }
    )
    table: dict = {}
    for name in plan["poolings"]:
        table[name] = {}
        for loss in plan["losses"]:
            cfg = run_config(name, loss, args.regime, args.smoke, args.backbone, args.source)
            runs = common.train_seeds(
                cfg, plan["seeds"], out, reuse=args.reuse, measure=common.target_share
            )
            table[name][loss] = common.summary(runs, METRICS)
            print(
                f"{name:8s} {loss:10s} MAP@R {common.cell(table[name][loss], 'map_at_r')}  target-tile weight "
                f"{share(table[name][loss])}  ({table[name][loss]['seconds']:.0f} s)",
                flush=True,
            )
    if common.CHOICE.dry_run:
        return {"dry_run": True}
    text = results_table(table, plan["losses"], args.regime)
    total = sum(entry["seconds"] for losses in table.values() for entry in losses.values())
    print(
        f"\n{common.data_label(f'collage_shared ({args.source})')}, {args.regime} {args.backbone}, seeds {list(plan['seeds'])}, test MAP@R x100, "
        f"mean ± std over seeds; training time {total:.0f} s\n{text}"
    )
    payload = {
        "plan": {k: list(v) for k, v in plan.items()},
        "regime": args.regime,
        "backbone": args.backbone,
        "source": args.source,
        "results": table,
        "table": text,
        "seconds": total,
        "threads": args.threads,
    }
    if args.merge:
        payload = merged(key, payload)
    payload["plots"] = [str(bar_plot(out, payload["results"], plan["losses"], key))]
    common.write_json(out / "results.json", payload)
    if not args.smoke:
        common.publish(
            "pooling_comparison",
            key,
            {k: v for k, v in payload.items() if k != "plots"},
            reproduction,
            plots=payload["plots"],
        )
    return payload


if __name__ == "__main__":
    main()
