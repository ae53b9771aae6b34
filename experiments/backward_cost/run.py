"""Closed-form vs autograd backward of GSP: time and memory against the number of fixed-point
iterations k (GSP paper supplement §1.5, Fig. 7; Gürbüz thesis §5.3.4.4, Fig. 5.9).

The GSP layer (costs + transport + weighting) on random local features, B = 32, n = 7x7 = 49,
d = 128, m = 64, mu = 0.3, eps = 5, forward + backward of a linear read-out of the pooled vector
and the pseudo-attributes, for k in {10, 25, 50, 100, 200}:

* ``closed_form``: the custom backward of Proposition 4.2 (the fused layer of
  ``gspdml.pooling.gsp.fused``, which keeps the costs and the ``[B, n]`` solution vectors, and
  whose forward stops once the iterates are stationary);
* ``unrolled``: autograd through all k iterations.

Claim (GSP paper supplement §1.5): with the closed form the overhead is small and k has a marginal effect;
with autodiff the cost grows substantially with k. Timing and memory accounting come from
``benchmarks/gsp_layer.py`` (``measure``: best-of-``repeats`` wall time; memory = bytes of the
tensors autograd keeps for backward beyond the inputs and parameters on CPU, peak CUDA allocation
on a GPU); freed host memory is kept in the process, as the trainer does. Each point is the
mean +- std over ``--trials`` independent best-of-``--repeats`` measurements.

    python experiments/backward_cost/run.py [--smoke] [--out DIR] [--threads 1]

Writes ``results.json`` and ``backward_cost.png``; a full run publishes
``experiments/backward_cost/results.json`` (key: the device).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "experiments")]

import common  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.gsp_layer import measure  # noqa: E402
from gspdml.pooling import GSP  # noqa: E402
from gspdml.pooling.simple import GAP  # noqa: E402
from gspdml.training.host_memory import keep_freed_host_memory  # noqa: E402
from gspdml.workflows.tables import markdown_table  # noqa: E402

BACKWARDS = ("closed_form", "unrolled")
#: the verdict rule's factors (cost at the largest k over the smallest): at most FLAT for "a
#: marginal effect" (closed form), at least GROWS for "substantially increases" (autodiff)
FLAT, GROWS = 1.5, 2.0
#: seed of the random local features and read-out (every k and backward sees the same inputs)
INPUT_SEED = 0


def layer_objective(pooling, local: torch.Tensor, target: torch.Tensor):
    """Forward closure: a linear read-out of the pooled vector plus a term on the attributes,
    so that gradients reach both ``rho`` and ``pi``."""

    def forward():
        out = pooling(local)
        extra = 0.0 if out.attributes is None else out.attributes.pow(2).sum()
        return (out.vector * target).sum() + extra

    return forward


def measure_trials(forward, inputs, device, repeats: int, trials: int, existing=()) -> dict:
    """Mean/std of ``trials`` best-of-``repeats`` times (ms) and the kept-for-backward MiB
    (not counting ``inputs`` and ``existing`` tensors)."""
    runs = [measure(forward, inputs, device, repeats, list(existing)) for _ in range(trials)]
    ms = np.array([r[0] for r in runs])
    return {"ms_mean": float(ms.mean()), "ms_std": float(ms.std()), "mib": float(runs[-1][1])}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    iters = results["iters"]
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(9, 3.4))
    for name, style in (("closed_form", "o-"), ("unrolled", "s--")):
        rows = results["gsp"][name]
        mean = np.array([r["ms_mean"] for r in rows])
        std = np.array([r["ms_std"] for r in rows])
        ax_t.plot(iters, mean, style, label=f"GSP {name.replace('_', ' ')}")
        ax_t.fill_between(iters, mean - std, mean + std, alpha=0.25)
        ax_m.plot(iters, [r["mib"] for r in rows], style, label=f"GSP {name.replace('_', ' ')}")
    gap = results["gap"]
    ax_t.axhline(gap["ms_mean"], color="gray", lw=1, label="GAP")
    ax_m.axhline(gap["mib"], color="gray", lw=1, label="GAP")
    ax_t.set(xlabel="iterations k", ylabel="forward + backward (ms)", title="time")
    ax_m.set(
        xlabel="iterations k",
        ylabel="MiB kept for backward" if results["device"] == "cpu" else "peak MiB",
        title="memory",
    )
    for ax in (ax_t, ax_m):
        ax.legend(fontsize=8)
    fig.suptitle(
        f"GSP layer, B={results['batch']}, n={results['n']}, d={results['dim']}, m={results['m']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def growth(rows: list[dict], key: str = "ms_mean") -> float:
    """Cost at the largest k over the cost at the smallest k."""
    return rows[-1][key] / rows[0][key]


def time_verdict(closed: list[dict], unrolled: list[dict]) -> str:
    """Claim "k has a marginal effect on the closed form and a substantial one on autodiff":
    *reproduced* when the closed form's time grows at most :data:`FLAT` times from the smallest
    to the largest k and autodiff's at least :data:`GROWS` times; *partly* when one holds."""
    flat, grows = growth(closed) <= FLAT, growth(unrolled) >= GROWS
    if flat and grows:
        return "reproduced"
    if flat or grows:
        return f"partly ({'autodiff grows less than' if flat else 'the closed form grows more than'} the rule's factor)"
    return "not reproduced (the closed form grows and autodiff does not)"


def memory_verdict(closed: list[dict], unrolled: list[dict]) -> str:
    """Claim "the closed form discards the iterates": *reproduced* when its kept memory is the
    same for every k and autodiff's rises with k; *partly* when one holds."""
    constant = len({row["mib"] for row in closed}) == 1
    rising = all(b["mib"] > a["mib"] for a, b in zip(unrolled, unrolled[1:]))
    if constant and rising:
        return "reproduced"
    return (
        "partly (only one of: closed form constant, autodiff rising)"
        if constant or rising
        else "not reproduced"
    )


def results_table(results: dict) -> str:
    rows = [
        [
            str(c["iters"]),
            f"{c['ms_mean']:.2f} ± {c['ms_std']:.2f}",
            f"{u['ms_mean']:.2f} ± {u['ms_std']:.2f}",
            f"{c['mib']:.2f}",
            f"{u['mib']:.2f}",
        ]
        for c, u in zip(results["gsp"]["closed_form"], results["gsp"]["unrolled"])
    ]
    gap = results["gap"]
    rows.append(["GAP", f"{gap['ms_mean']:.2f} ± {gap['ms_std']:.2f}", "", f"{gap['mib']:.2f}", ""])
    return markdown_table(
        ["k", "closed-form ms", "unrolled ms", "closed-form MiB", "unrolled MiB"], rows
    )


def reproduction(runs: dict) -> list[dict]:
    """README rows: time and memory of the closed-form backward against autodiff (Fig. 7)."""
    rows = []
    for key, payload in runs.items():
        closed, unrolled, iters = (
            payload["gsp"]["closed_form"],
            payload["gsp"]["unrolled"],
            payload["plan"]["iters"],
        )
        span = f"k = {iters[0]} → {iters[-1]}"
        rows.append(
            {
                "experiment": f"GSP backward cost, time, {key} (GSP paper supplement §1.5, Fig. 7)",
                "claim": "with the closed-form gradient k has a marginal effect on the cost; with autodiff it grows substantially",
                "paper": "Fig. 7 (CUB, C2; no numbers in the text): closed form flat in k, autodiff rising",
                "ours": (
                    f"{span}: closed form {closed[0]['ms_mean']:.2f} → {closed[-1]['ms_mean']:.2f} ms (×{growth(closed):.2f}), "
                    f"autodiff {unrolled[0]['ms_mean']:.2f} → {unrolled[-1]['ms_mean']:.2f} ms (×{growth(unrolled):.2f})"
                ),
                "verdict": time_verdict(closed, unrolled),
            }
        )
        rows.append(
            {
                "experiment": f"GSP backward cost, memory, {key} (GSP paper supplement §1.5)",
                "claim": "the closed form discards the iterates (memory constant in k); autodiff stores every iteration",
                "paper": "§1.5: memory efficient, the intermediate outputs are discarded (no numbers)",
                "ours": (
                    f"{span}: closed form {closed[0]['mib']:.2f} → {closed[-1]['mib']:.2f} MiB, "
                    f"autodiff {unrolled[0]['mib']:.2f} → {unrolled[-1]['mib']:.2f} MiB"
                ),
                "verdict": memory_verdict(closed, unrolled),
            }
        )
    return rows


def main(argv=None) -> dict:
    parser = common.parser(
        "backward_cost",
        "GSP closed-form vs autograd backward: time and memory vs iterations",
        smoke_help="tiny tensors, k in {2, 8}, one trial",
        reuse=False,
        threads=1,
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, nargs="+", default=[10, 25, 50, 100, 200])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--side", type=int, default=7, help="feature map side (n = side^2)")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args(argv)
    if args.smoke:
        args.iters, args.batch, args.side, args.dim, args.m, args.repeats, args.trials = (
            [2, 8],
            4,
            3,
            8,
            4,
            1,
            1,
        )
    start = time.perf_counter()
    keep_freed_host_memory()
    device = torch.device(args.device)
    common.setup(args)
    torch.manual_seed(INPUT_SEED)
    local = torch.randn(
        args.batch, args.dim, args.side, args.side, device=device, requires_grad=True
    )
    target = torch.randn(args.batch, args.dim, device=device)
    results = {
        "device": device.type,
        "threads": args.threads,
        "batch": args.batch,
        "n": args.side**2,
        "dim": args.dim,
        "m": args.m,
        "mu": 0.3,
        "eps": 5.0,
        "iters": args.iters,
        "repeats": args.repeats,
        "trials": args.trials,
    }
    results["gap"] = measure_trials(
        layer_objective(GAP(args.dim), local, target), [local], device, args.repeats, args.trials
    )
    results["gsp"] = {name: [] for name in BACKWARDS}
    print(
        f"device={device} threads={args.threads}; GAP: {results['gap']['ms_mean']:.2f} ms, {results['gap']['mib']:.2f} MiB"
    )
    print("| k | closed-form ms | unrolled ms | closed-form MiB | unrolled MiB |")
    print("|---|---|---|---|---|")
    for iters in args.iters:
        for name in BACKWARDS:
            layer = GSP(
                args.dim,
                num_prototypes=args.m,
                mu=0.3,
                eps=5.0,
                iters=iters,
                init="random",
                backward=name,
            ).to(device)
            row = measure_trials(
                layer_objective(layer, local, target),
                [local],
                device,
                args.repeats,
                args.trials,
                [*layer.parameters(), target],
            )
            results["gsp"][name].append({"iters": iters, **row})
        c, u = results["gsp"]["closed_form"][-1], results["gsp"]["unrolled"][-1]
        print(
            f"| {iters} | {c['ms_mean']:.2f} ± {c['ms_std']:.2f} | {u['ms_mean']:.2f} ± {u['ms_std']:.2f} "
            f"| {c['mib']:.2f} | {u['mib']:.2f} |",
            flush=True,
        )
    results["seconds"] = time.perf_counter() - start
    results["table"] = results_table(results)
    common.write_json(args.out / "results.json", results)
    if not args.smoke:
        plot(results, args.out / "backward_cost.png")
        plan = {
            "seeds": [INPUT_SEED],
            **{
                k: results[k]
                for k in ("iters", "batch", "n", "dim", "m", "mu", "eps", "repeats", "trials")
            },
        }
        payload = {
            "plan": plan,
            **{k: results[k] for k in ("device", "gap", "gsp", "table", "seconds", "threads")},
        }
        common.publish(
            "backward_cost",
            results["device"],
            payload,
            reproduction,
            plots=[str(args.out / "backward_cost.png")],
        )
    return results


if __name__ == "__main__":
    main()
