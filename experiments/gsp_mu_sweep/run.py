"""Effect of the transported fraction mu (seed 000 §5.3 L211-218, Fig. 6; thesis Fig. 5.8) on the
embedded digits collage.

Seed 000 sweeps mu on CUB with the C2 loss: relatively low values of mu perform similarly, and
as mu grows the performance drops towards GAP (over-estimating the foreground ratio). Here:
the preset ``scratch-gsp`` (collage_digits, small_cnn, 1x1 head to 128, GSP m = 16, eps = 10,
C2, Adam 1e-3, bf16) with mu in {0.1, 0.25, 0.5, 1.0} (the target tile is 1/4 of the image;
mu = 1 is GAP exactly, Claim 4.1), a short schedule (``--steps``, default 80) and validation
MAP@R at the end of training; test MAP@R is reported (mean +- std over ``--seeds``).

    python experiments/gsp_mu_sweep/run.py [--smoke] [--out DIR] [--seeds 0 1 2] [--steps 80]

Writes ``results.json``, ``mu_sweep.png`` and the runs under ``<out>/runs/``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "experiments")]

import common  # noqa: E402

from gspdml.workflows.sweeps import run_sweep  # noqa: E402

# a tiny collage and model that train in seconds (the test suite's smoke run)
SMOKE_OVERRIDES = [
    "data.dataset.images_per_class=8", "data.dataset.class_split=[12, 6, 6]", "data.classes_per_batch=4",
    "model.backbone.widths=[8, 16, 16]", "model.embedding_dim=16", "model.pooling.num_prototypes=4",
    "model.pooling.memory_size=16",
]


def common_overrides(steps: int, smoke: bool) -> list[str]:
    """Short schedule, one validation round at the end, no early stopping, quiet trainer."""
    overrides = [f"schedule.max_steps={steps}", f"evaluation.every={steps}", "evaluation.patience=null",
                 "trainer.progress=false"]
    return overrides + (SMOKE_OVERRIDES if smoke else [])


def plot(sweep: dict, mus: list[float], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    mean = np.array([100 * sweep[f"mu={mu:g}"]["map_at_r"]["mean"] for mu in mus])
    std = np.array([100 * sweep[f"mu={mu:g}"]["map_at_r"]["std"] for mu in mus])
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot(mus, mean, "o-", label="GSP")
    ax.fill_between(mus, mean - std, mean + std, alpha=0.25)
    ax.axhline(mean[mus.index(1.0)] if 1.0 in mus else np.nan, color="gray", ls="--", lw=1, label="GAP (mu = 1)")
    ax.set(xlabel="mu", ylabel="test MAP@R (%)", title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> dict:
    parser = common.parser("gsp_mu_sweep", "Effect of mu on GSP (seed 000 Fig. 6), embedded digits collage", smoke_help="tiny data and model, 3 steps, mu in {0.25, 1}", reuse=False, threads=None)
    parser.add_argument("--config", default="scratch-gsp", help="config file or preset name")
    parser.add_argument("--mus", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=80)
    args = parser.parse_args(argv)
    if args.smoke:
        args.mus, args.steps, args.seeds = [0.25, 1.0], 3, args.seeds[:1]
    start = time.perf_counter()
    common.setup(args)
    variants = {f"mu={mu:g}": [f"model.pooling.mu={mu}"] for mu in args.mus}
    sweep = run_sweep(args.config, variants, args.seeds, args.out / "runs", common_overrides(args.steps, args.smoke))
    print("\n| mu | test MAP@R (%) | test P@1 (%) |\n|---|---|---|")
    for label, row in sweep.items():
        print(f"| {label[3:]} | {100 * row['map_at_r']['mean']:.2f} ± {100 * row['map_at_r']['std']:.2f} "
              f"| {100 * row['precision_at_1']['mean']:.2f} ± {100 * row['precision_at_1']['std']:.2f} |")
    results = {"config": str(args.config), "steps": args.steps, "seeds": args.seeds, "mus": args.mus,
               "sweep": sweep, "seconds": time.perf_counter() - start}
    if not args.smoke:
        plot(sweep, args.mus, args.out / "mu_sweep.png",
             f"collage_digits, C2, {args.steps} steps, {len(args.seeds)} seed(s)")
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
