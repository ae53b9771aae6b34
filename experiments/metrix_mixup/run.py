"""Metrix: clean vs input / feature / embedding mixup in the papers' regime (Psomas thesis chapter 2,
Tables 2.3 and 2.5).

Every variant trains ``demo-base`` (the faithful collage ``collage_shared``, ResNet20 pre-trained
on all 100 tile classes, 128-D, Adam 1e-3, plateau x0.5 after 5 validation rounds, early
stopping and restore-best on the validation classes' MAP@R, 16 x 4 batches, precision auto) with the
``metrix`` loss on the contrastive loss (margin 0.5) and the same budget, seeds and selection
rule. ``--regime finetune`` (default; the thesis fine-tunes a pre-trained backbone) trains the
backbone at a tenth of the learning rate, ``--regime frozen`` keeps it fixed. The wiring after
the mixing point is the authors' (Psomas thesis §2.4.1): feature mixup mixes the backbone's last maps,
then GAP+GMP and the embedding layer follow (``--wiring nonlinear``, default), so that mixing
inputs, maps or embeddings are different operations; ``--wiring linear`` (GAP after a 1x1 head)
is the earlier wiring, under which feature mixup of the maps equals mixup of the un-normalised
embeddings.

* ``clean``: the same ``metrix`` loss with ``mix_weight: 0`` (only the clean contrastive term);
* ``input`` / ``feature`` (Metrix) / ``embedding``: ``w = 0.4``, ``alpha = 2``, pair kind
  (pos-neg / anc-neg) drawn per iteration, every positive of an anchor (``positives: all``).

Besides the test retrieval metrics it reports, on the test embeddings, the alignment and
uniformity of Wang & Isola (ICML 2020): ``align = E_pos ||f(x) - f(y)||^2`` over same-class
pairs and ``uniform = log E exp(-2 ||f(x) - f(y)||^2)`` over all pairs (both lower is better);
The Psomas thesis (§2.1) measures both on the test distributions to show that mixing improves them.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402
import torch  # noqa: E402

from gspdml.config import RunConfig  # noqa: E402
from gspdml.workflows.tables import markdown_table  # noqa: E402

#: the ``metrix`` loss on the contrastive loss (margin 0.5), ``w = 0.4``, ``alpha = 2``
LOSS = {
    "name": "metrix",
    "loss": {"contrastive": {"pos_margin": 0.0, "neg_margin": 0.5}},
    "mix_alpha": 2.0,
    "mix_weight": 0.4,
}
#: variant: the options of :data:`LOSS` it sets
VARIANTS = {
    "clean": {"level": "embedding", "mix_weight": 0.0},
    "input": {"level": "input"},
    "feature": {"level": "feature"},
    "embedding": {"level": "embedding"},
}
#: what follows the backbone map (the mixing point of feature mixup), as fields of the ``model``
#: section; the demo presets project after pooling (``model.head: global``)
WIRINGS = {
    "nonlinear": {"pooling": {"name": "gap_gmp"}},
    "linear": {"pooling": {"name": "gap"}, "head": "local"},
}
METRICS = ("map_at_r", "precision_at_1")
GEOMETRY = ("alignment", "uniformity")
#: the demo presets' selection rule, evaluated every 25 steps of a 200-step budget (CPU-sized)
BUDGET = {"steps": 200, "every": 25}
FULL = dict(seeds=(0, 1, 2), variants=tuple(VARIANTS))
SMOKE = dict(seeds=(0,), variants=("clean", "feature"))
#: Psomas thesis Table 2.3 (contrastive, ResNet-50, d = 512, CUB200 R@1) and its Table 2.5 (Cars196)
PAPER = "CUB200 R@1 64.7 → 66.3 input / 67.4 feature / 66.4 embedding (Table 2.3); feature best on Cars196 (Table 2.5)"


def run_config(
    variant: str, regime: str = "finetune", wiring: str = "nonlinear", smoke: bool = False
) -> RunConfig:
    """Resolved config of one variant: ``demo-base`` with the Metrix loss, the regime and wiring."""
    cfg = common.with_loss(common.papers_regime("demo-base", smoke), **LOSS)
    cfg = common.with_loss(cfg, **VARIANTS[variant])
    cfg = common.REGIMES[regime](common.with_model(cfg, **WIRINGS[wiring]))
    cfg = cfg if smoke else common.with_steps(cfg, **BUDGET)
    return common.named(cfg, f"{regime}-{wiring}-{variant}")


def alignment_uniformity(
    embeddings: torch.Tensor, labels: torch.Tensor, t: float = 2.0
) -> tuple[float, float]:
    """Wang & Isola's alignment (``alpha = 2``: mean squared distance of same-class pairs) and
    uniformity (``log`` mean ``exp(-t d^2)`` over all pairs ``i != j``) of L2-normalised rows."""
    e = torch.nn.functional.normalize(embeddings.double(), dim=1)
    squared = torch.cdist(e, e).pow(2)
    off_diagonal = ~torch.eye(len(e), dtype=torch.bool)
    positive = (labels[:, None] == labels[None, :]) & off_diagonal
    return float(squared[positive].mean()), float(
        torch.log(torch.exp(-t * squared[off_diagonal]).mean())
    )


def geometry(results) -> dict:
    """Alignment and uniformity of the test embeddings of each finished run."""
    from gspdml.data.base import build_data
    from gspdml.models.inference import embed
    from gspdml.training import load_run

    values: dict = {key: [] for key in GEOMETRY}
    for result in results:
        if "test" not in result:
            continue
        cfg, model = load_run(result["run_dir"])
        test = build_data(cfg.data.dataset, seed=int(cfg.seed)).test.query
        for key, value in zip(GEOMETRY, alignment_uniformity(*embed(model, test))):
            values[key].append(value)
    return values


def paired_gain(entry: dict, clean: dict | None) -> str:
    """``mean ± std`` over seeds of MAP@R minus the clean loss's MAP@R of the same seed (the seed
    fixes the collage and the initial weights); ``-`` without a clean run."""
    if clean is None or len(entry["map_at_r"]["values"]) != len(clean["map_at_r"]["values"]):
        return "-"
    mean, std = common.mean_std(
        [a - b for a, b in zip(entry["map_at_r"]["values"], clean["map_at_r"]["values"])]
    )
    return f"{mean:+.2f} ± {std:.2f}"


def reproduction(runs: dict) -> list[dict]:
    """README rows: per regime, each mixup against the clean loss, and feature mixup against all
    the others, by the rule of :func:`common.verdict` on test MAP@R."""
    rows = []
    for key, payload in runs.items():
        table = payload["results"]
        if set(table) != set(VARIANTS):
            continue
        verdicts = [
            f"{m} > clean: {common.verdict(table[m], {'clean': table['clean']})}"
            for m in ("input", "feature", "embedding")
        ]
        verdicts.append(
            "feature best: "
            + common.verdict(table["feature"], {m: e for m, e in table.items() if m != "feature"})
        )
        rows.append(
            {
                "experiment": f"Metrix mixup, {key} (Psomas thesis Table 2.3, Table 2.5)",
                "claim": "each mixup type (input, feature, embedding) improves the clean contrastive loss; feature mixup is best",
                "paper": PAPER,
                "ours": "MAP@R "
                + "; ".join(f"{m} {common.cell(e, 'map_at_r')}" for m, e in table.items()),
                "verdict": "; ".join(verdicts),
            }
        )
    return rows


def plot(out: Path, table: dict) -> Path:
    """MAP@R per variant, and alignment against uniformity per run (Wang & Isola's Fig. layout)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 3.0))
    bars, scatter = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    names = list(table)
    bars.bar(
        names,
        [table[n]["map_at_r"]["mean"] for n in names],
        yerr=[table[n]["map_at_r"]["std"] for n in names],
        capsize=3,
    )
    bars.set_ylabel("test MAP@R (%)")
    bars.grid(axis="y", alpha=0.3)
    for name in names:
        scatter.scatter(
            table[name]["uniformity"]["values"],
            table[name]["alignment"]["values"],
            label=name,
            s=20,
        )
    scatter.set_xlabel("uniformity (lower is better)")
    scatter.set_ylabel("alignment (lower is better)")
    scatter.legend(fontsize=7)
    scatter.grid(alpha=0.3)
    figure.tight_layout()
    path = out / "metrix.png"
    figure.savefig(path, dpi=80)
    return path


def main(argv=None) -> dict:
    parser = common.parser("metrix_mixup", __doc__.splitlines()[0], datasets=("collage_cifar",))
    parser.add_argument(
        "--regime", choices=tuple(common.REGIMES), default="finetune", help="backbone regime"
    )
    parser.add_argument(
        "--wiring",
        choices=tuple(WIRINGS),
        default="nonlinear",
        help="what follows the mixing point",
    )
    parser.add_argument(
        "--variants", nargs="+", choices=tuple(VARIANTS), help="variants to run (default: all)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, help="seeds (default 0 1 2)")
    args = parser.parse_args(argv)
    out = common.setup(args)
    plan = dict(SMOKE if args.smoke else FULL)
    plan.update({k: tuple(v) for k, v in (("variants", args.variants), ("seeds", args.seeds)) if v})
    table: dict = {}
    for variant in plan["variants"]:
        cfg = run_config(variant, args.regime, args.wiring, args.smoke)
        results = common.train_seeds(cfg, plan["seeds"], out, reuse=args.reuse)
        entry = common.summary(results, METRICS)
        for key, values in geometry(results).items():
            mean, std = common.mean_std(values) if values else (float("nan"), float("nan"))
            entry[key] = {"values": values, "mean": mean, "std": std}
        table[variant] = entry
        print(
            f"{variant:10s} MAP@R {common.cell(entry, 'map_at_r')}  ({entry['seconds']:.0f} s)",
            flush=True,
        )
    if common.CHOICE.dry_run:
        return {"dry_run": True}
    rows = [
        [
            variant,
            *(common.cell(entry, m) for m in METRICS),
            paired_gain(entry, table.get("clean")),
            *(f"{entry[k]['mean']:.3f} ± {entry[k]['std']:.3f}" for k in GEOMETRY),
            f"{entry['seconds']:.0f}",
        ]
        for variant, entry in table.items()
    ]
    text = markdown_table(
        [
            "mixup",
            "MAP@R",
            "P@1",
            "MAP@R − clean, same seed",
            "alignment",
            "uniformity",
            "time (s)",
        ],
        rows,
    )
    total = sum(entry["seconds"] for entry in table.values())
    key = f"{args.regime} ResNet20, {args.wiring} wiring"
    print(
        f"\n{common.data_label('collage_shared (digits)')}, {key}, seeds {list(plan['seeds'])}, test split, mean ± std over seeds; "
        f"training time {total:.0f} s\n{text}"
    )
    payload = {
        "plan": {k: list(v) for k, v in plan.items()},
        "regime": args.regime,
        "wiring": args.wiring,
        "results": table,
        "table": text,
        "seconds": total,
        "threads": args.threads,
        "plots": [str(plot(out, table))],
    }
    common.write_json(out / "results.json", payload)
    if not args.smoke and set(plan["variants"]) == set(VARIANTS):
        common.publish(
            "metrix_mixup",
            key,
            {k: v for k, v in payload.items() if k != "plots"},
            reproduction,
            plots=payload["plots"],
        )
    return payload


if __name__ == "__main__":
    main()
