"""Effect of the transported fraction μ on GSP (GSP paper §5.2.3, Fig. 6; thesis Fig. 5.8)
in the GSP paper's Cifar Collage regime.

The GSP paper sweeps μ on CUB with the C2 loss: relatively low values of μ perform similarly, and as μ
grows the performance drops towards GAP (over-estimating the foreground ratio); μ = 1 is GAP
exactly (Claim 4.1). Here every μ is the preset ``demo-gsp`` (faithful collage ``collage_shared``
whose target tile is 1/4 of the image, pre-trained frozen ResNet20, the authors' wiring with a
bias-free 1x1 embedding convolution before the transport, GSP m = 128, ε = 10, C2, Adam 1e-3,
plateau x0.5 patience 5, early stopping on the validation classes, 16 x 4 batches) with only
``model.pooling.mu`` changed, over the same seeds. Reports test MAP@R and P@1 (mean ± std over
seeds) and the pooling weight on the target tile; a full run publishes
``experiments/gsp_mu_sweep/results.json``.

    python experiments/gsp_mu_sweep/run.py [--smoke] [--out DIR] [--threads 1] [--reuse] [--mus ...] [--seeds ...]
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # experiments/: common (which adds src/)
import common  # noqa: E402

from gspdml.config import RunConfig  # noqa: E402
from gspdml.workflows.tables import markdown_table  # noqa: E402

#: share of the image covered by the collage's target tile (one tile of the 2 x 2 grid)
FOREGROUND = 0.25
METRICS = ("map_at_r", "precision_at_1")
FULL = dict(seeds=(0, 1, 2), mus=(0.05, 0.1, 0.2, 0.5, 1.0))
SMOKE = dict(seeds=(0,), mus=(0.2, 1.0))
#: Table 5 of the GSP paper supplement §1.6 (CUB, C2 MAP@R): the screening rows at μ = 0.3 and μ = 0.7
TABLE5_C2_BY_MU = {0.3: (40.63, 40.22, 36.11, 39.61), 0.7: (40.41, 40.07, 39.11, 35.36)}
PAPER = (
    "Fig. 6 (CUB, C2; no numbers in the text): low μ alike, then a drop towards GAP as μ grows; "
    "Tab. 5 screening, C2 MAP@R averaged over its m, ε, λ levels: "
    + ", ".join(f"μ = {mu:g} {sum(v) / len(v):.2f}" for mu, v in TABLE5_C2_BY_MU.items())
)


def variant_config(preset: str, label: str, change: common.Change, smoke: bool) -> RunConfig:
    """The papers' regime (:func:`common.papers_regime` of ``preset``) with only ``change``
    applied, named after ``label`` (``"m=64 eps=5"`` -> ``m64_eps5``)."""
    cfg = change(common.papers_regime(preset, smoke))
    return common.named(cfg, label.replace(" ", "_").replace("=", ""))


def train_variants(
    preset: str,
    variants: dict[str, common.Change],
    seeds,
    out: Path,
    smoke: bool,
    reuse: bool,
    measure=None,
) -> dict[str, dict]:
    """Train ``preset`` with each variant's change over ``seeds``; ``{label: common.summary}``.
    Every variant has the same budget, selection rule and seeds (only its change differs)."""
    table = {}
    for label, change in variants.items():
        cfg = variant_config(preset, label, change, smoke)
        table[label] = common.summary(
            common.train_seeds(cfg, seeds, out, reuse=reuse, measure=measure), METRICS
        )
        print(
            f"{label:12s} MAP@R {common.cell(table[label], 'map_at_r')}  ({table[label]['seconds']:.0f} s)",
            flush=True,
        )
    return table


def label(mu: float) -> str:
    return f"mu={mu:g}"


def share(entry: dict) -> str:
    stats = entry.get("target_share")
    return "-" if stats is None else f"{stats['mean']:.2f} ± {stats['std']:.2f}"


def results_table(table: dict[str, dict], mus) -> str:
    rows = [
        [
            f"{mu:g}" + (" (= GAP)" if mu == 1.0 else ""),
            common.cell(table[label(mu)], "map_at_r"),
            common.cell(table[label(mu)], "precision_at_1"),
            share(table[label(mu)]),
        ]
        for mu in mus
    ]
    return markdown_table(["μ", "test MAP@R (%)", "test P@1 (%)", "target-tile weight"], rows)


def low_mu_alike(table: dict[str, dict], mus) -> tuple[str, str]:
    """Claim "relatively low μ perform similarly", for the μ at or below the foreground ratio:
    *reproduced* when the spread of their mean MAP@R (max − min) is within the largest seed std
    among them, *partly* within twice it, *not reproduced* otherwise. Returns (ours, verdict)."""
    low = [table[label(mu)]["map_at_r"] for mu in mus if mu <= FOREGROUND]
    means = [entry["mean"] for entry in low]
    spread, noise = max(means) - min(means), max(entry["std"] for entry in low)
    ours = f"μ ≤ {FOREGROUND:g}: spread of means {spread:.2f} vs largest seed std {noise:.2f}"
    if spread <= noise:
        return ours, "reproduced"
    if spread <= 2 * noise:
        return ours, "partly (spread within two seed stds)"
    return ours, "not reproduced (spread above two seed stds)"


def drop_towards_gap(table: dict[str, dict], mus) -> tuple[str, str]:
    """Claim "as μ grows past the foreground ratio the performance drops towards GAP (μ = 1)":
    the best low μ against every larger μ by :func:`common.verdict`, and the means from the
    largest low μ on must not rise; *partly* when they rise or the bands overlap."""
    low = [mu for mu in mus if mu <= FOREGROUND]
    best = max(low, key=lambda mu: table[label(mu)]["map_at_r"]["mean"])
    higher = {f"μ={mu:g}": table[label(mu)] for mu in mus if mu > FOREGROUND}
    tail = [table[label(mu)]["map_at_r"]["mean"] for mu in mus if mu >= max(low)]
    falling = all(b <= a for a, b in zip(tail, tail[1:]))
    ours = (
        f"best low μ = {best:g}: {common.cell(table[label(best)], 'map_at_r')}; "
        + "; ".join(f"{name} {common.cell(entry, 'map_at_r')}" for name, entry in higher.items())
        + f"; means from μ = {max(low):g} on {'fall' if falling else 'do not fall'} monotonically"
    )
    verdict = common.verdict(table[label(best)], higher)
    if verdict == "reproduced" and not falling:
        verdict = "partly (the means do not fall monotonically with μ)"
    return ours, verdict


def reproduction(runs: dict) -> list[dict]:
    """README rows: the two halves of the Fig. 6 claim, per recorded run."""
    rows = []
    for key, payload in runs.items():
        table, mus = payload["results"], payload["plan"]["mus"]
        for part, claim, rule in (
            ("low μ", "relatively low μ perform similarly", low_mu_alike),
            ("growing μ", "as μ grows the performance drops towards GAP (μ = 1)", drop_towards_gap),
        ):
            ours, verdict = rule(table, mus)
            rows.append(
                {
                    "experiment": f"GSP μ sweep, {part}, C2, {key} ResNet20 (GSP paper Fig. 6)",
                    "claim": claim,
                    "paper": PAPER,
                    "ours": ours,
                    "verdict": verdict,
                }
            )
    return rows


def plot(table: dict[str, dict], mus, path: Path) -> Path:
    from matplotlib.figure import Figure

    mean = [table[label(mu)]["map_at_r"]["mean"] for mu in mus]
    std = [table[label(mu)]["map_at_r"]["std"] for mu in mus]
    figure = Figure(figsize=(4.5, 3.2))
    axes = figure.add_subplot(1, 1, 1)
    axes.errorbar(mus, mean, yerr=std, marker="o", capsize=3, label="GSP (m = 128, ε = 10)")
    axes.axvline(FOREGROUND, color="gray", ls=":", lw=1, label="target-tile share 1/4")
    axes.set(xscale="log", xlabel="μ (log scale; μ = 1 is GAP)", ylabel="test MAP@R (%)")
    axes.legend(fontsize=7)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    return path


def main(argv=None) -> dict:
    parser = common.parser("gsp_mu_sweep", __doc__.splitlines()[0], datasets=("collage_cifar",))
    parser.add_argument(
        "--mus", type=float, nargs="+", help="transported fractions μ (default 0.05 0.1 0.2 0.5 1)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default 0 1 2)")
    args = parser.parse_args(argv)
    out = common.setup(args)
    plan = dict(SMOKE if args.smoke else FULL)
    plan.update({k: tuple(v) for k, v in (("mus", args.mus), ("seeds", args.seeds)) if v})
    variants = {label(mu): functools.partial(common.with_pooling, mu=mu) for mu in plan["mus"]}
    table = train_variants(
        "demo-gsp",
        variants,
        plan["seeds"],
        out,
        args.smoke,
        args.reuse,
        measure=common.target_share,
    )
    if common.CHOICE.dry_run:
        return {"dry_run": True}
    text = results_table(table, plan["mus"])
    total = sum(entry["seconds"] for entry in table.values())
    print(
        f"\n{common.data_label('collage_shared (digits)')}, frozen backbone, GSP m = 128, ε = 10, C2, seeds {list(plan['seeds'])}, "
        f"training time {total:.0f} s\n{text}"
    )
    payload = {
        "plan": {k: list(v) for k, v in plan.items()},
        "results": table,
        "table": text,
        "seconds": total,
        "threads": args.threads,
        "plots": [str(plot(table, plan["mus"], out / "mu_sweep.png"))],
    }
    common.write_json(out / "results.json", payload)
    if not args.smoke:
        common.publish(
            "gsp_mu_sweep",
            "frozen",
            {k: v for k, v in payload.items() if k != "plots"},
            reproduction,
            plots=payload["plots"],
        )
    return payload


if __name__ == "__main__":
    main()
