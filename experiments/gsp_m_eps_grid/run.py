"""The m-eps grid of GSP (seed 000 supplement L518-520, Fig. 8a; thesis Fig. 5.10) on the
embedded digits collage.

Seed 000 searches the number of prototypes m and the entropy weight eps on CUB with mu = 0.3,
lambda = 0.1: both C2 and PNCA are best at m = 64, eps = 5 is best for C2 (0.5 for PNCA); eps
has the largest effect and m a small one (screening, Tab. 5). Here: the preset ``scratch-gsp``
(collage_digits, small_cnn, C2, mu = 0.25 = the collage's foreground ratio, no ZSR, bf16) over
m in {8, 64} x eps in {0.5, 5}, a short schedule (``--steps``, default 60), test
MAP@R (mean +- std over ``--seeds``).

    python experiments/gsp_m_eps_grid/run.py [--smoke] [--out DIR] [--seeds 0 1 2] [--steps 60]

Writes ``results.json``, ``m_eps_grid.png`` and the runs under ``<out>/runs/``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "experiments")]

import common  # noqa: E402

from experiments.gsp_mu_sweep.run import common_overrides  # noqa: E402
from gspdml.workflows.sweeps import run_sweep  # noqa: E402


def label(m: int, eps: float) -> str:
    return f"m={m} eps={eps:g}"


def plot(sweep: dict, ms: list[int], epss: list[float], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.array([[100 * sweep[label(m, e)]["map_at_r"]["mean"] for e in epss] for m in ms])
    fig, ax = plt.subplots(figsize=(4.2, 3.4))
    image = ax.imshow(grid, cmap="viridis", origin="lower")
    for i in range(len(ms)):
        for j in range(len(epss)):
            ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", color="white", fontsize=9)
    ax.set_xticks(range(len(epss)), [f"{e:g}" for e in epss])
    ax.set_yticks(range(len(ms)), [str(m) for m in ms])
    ax.set(xlabel="eps", ylabel="m (prototypes)", title=title)
    fig.colorbar(image, ax=ax, label="test MAP@R (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> dict:
    parser = common.parser("gsp_m_eps_grid", "m x eps grid of GSP (seed 000 Fig. 8a), embedded digits collage", smoke_help="tiny data and model, 3 steps, a 2 x 1 grid", reuse=False, threads=None)
    parser.add_argument("--config", default="scratch-gsp", help="config file or preset name")
    parser.add_argument("--ms", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--epss", type=float, nargs="+", default=[0.5, 5.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args(argv)
    if args.smoke:
        args.ms, args.epss, args.steps, args.seeds = [2, 4], [5.0], 3, args.seeds[:1]
    start = time.perf_counter()
    common.setup(args)
    variants = {label(m, e): [f"model.pooling.num_prototypes={m}", f"model.pooling.eps={e}"]
                for m in args.ms for e in args.epss}
    sweep = run_sweep(args.config, variants, args.seeds, args.out / "runs", common_overrides(args.steps, args.smoke))
    print("\n| m \\ eps | " + " | ".join(f"{e:g}" for e in args.epss) + " |")
    print("|---" * (len(args.epss) + 1) + "|")
    for m in args.ms:
        cells = [sweep[label(m, e)]["map_at_r"] for e in args.epss]
        print(f"| {m} | " + " | ".join(f"{100 * c['mean']:.2f} ± {100 * c['std']:.2f}" for c in cells) + " |")
    best = max(sweep, key=lambda k: sweep[k]["map_at_r"]["mean"])
    print(f"\nbest: {best} (seed 000 on CUB with C2: m = 64, eps = 5)")
    results = {"config": str(args.config), "steps": args.steps, "seeds": args.seeds, "ms": args.ms, "epss": args.epss,
               "sweep": sweep, "best": best, "seconds": time.perf_counter() - start}
    if not args.smoke:
        plot(sweep, args.ms, args.epss, args.out / "m_eps_grid.png",
             f"collage_digits, C2, {args.steps} steps, {len(args.seeds)} seed(s)")
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
