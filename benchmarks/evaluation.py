"""Exact retrieval metrics: gspdml vs pytorch-metric-learning on SOP- and In-Shop-sized data.

    PYTHONPATH=src python benchmarks/evaluation.py [--datasets sop inshop] [--repeats 3] [--seed 0]
    PYTHONPATH=src python benchmarks/evaluation.py --datasets --million [--million-queries 50000] [--device cuda]
    PYTHONPATH=src python benchmarks/evaluation.py --datasets --ties [--tie-sizes 5000 60000] [--tie-patterns collapsed-1e-5]
    PYTHONPATH=src python benchmarks/evaluation.py --datasets --report [--report-sizes 20000]

Synthetic clustered embeddings (unit class centres + Gaussian noise, L2-normalised, float32):

- ``sop``: 60,502 x 128 leave-one-out, 11,316 classes of 2-12 images (mean 5.35, as SOP test);
- ``inshop``: 14,218 queries x 12,612 gallery, 3,985 classes (as In-Shop test);
- ``--million``: 1,000,000 x 128 leave-one-out, 100,000 classes of 5-15 (mean 10), gspdml only.
  With ``--million-queries N`` only the first N rows are searched against all 1,000,000 (query /
  gallery mode, same cost per query as leave-one-out) and the full time is extrapolated
  linearly (x 1,000,000 / N), printed as "extrapolated". The metrics of that row are not the
  leave-one-out ones (each query finds itself at distance 0: P@1 = 1); only time and memory count.
- ``--ties``: tied and near-tied embeddings, N x 128 leave-one-out for each N of ``--tie-sizes``,
  labels of SOP-like classes (2-12 rows, mean 5.35, in row order): ``equal`` (every row the same
  unit vector), ``two`` (two unit vectors, each row one of them at random), ``duplicated``
  (N / 2.5 clustered vectors as ``sop``, each repeated 2 or 3 times with its label, rows
  shuffled), ``collapsed-<s>`` for s in 1e-7, 1e-5, 1e-4 (one unit vector plus Gaussian noise of
  norm ~s, L2-normalised); ``--tie-patterns`` picks some of them (the arrays stay those of the
  whole table). Each row times (wall and CPU time), in one run on the same saved arrays, gspdml's bounded
  metrics (MAP@R, P@1, R-precision, Recall@1: the default report) beside PML's
  ``AccuracyCalculator(k="max_bin_count")`` for the same three, and gspdml's whole-ranking mAP
  and MRR beside PML's ``mean_average_precision`` and ``mean_reciprocal_rank`` with ``k=None``
  (a faiss search of every reference: N^2 distances and indices in memory, so PML's whole
  ranking is left out, and said so, where that exceeds ``--pml-memory-gb``). PML (faiss) orders
  tied neighbours its own way and ranks a tie group one by one where gspdml's mAP and MRR rank it
  as a group (sklearn's rule), so the metrics may differ on ties; the table prints the largest
  difference of each pair.
- ``--report``: the cost of the whole-ranking metrics. N x 128 leave-one-out SOP-like data for
  each N of ``--report-sizes``, scored by :func:`gspdml.evaluation.service.evaluate_embeddings`
  with a validation round's metrics (the default report: MAP@R, P@1, R-precision, Recall@K) and
  with the full mAP and uncut MRR named besides (:mod:`gspdml.evaluation.whole_ranking`); the
  table prints both times, peak memory and the ratio. Measured before the default report left
  them out, on one thread of an Intel Xeon @ 2.50GHz (shared, so times vary by ~30 %): 20,000 x
  128, 27 s with mAP/MRR vs 6 s without (peak 630 vs 440 MB); SOP-sized 60,000 x 128, 209 s vs
  26 s (peak 847 vs 641 MB; a search of every reference would hold a 60,000 x 60,000 neighbour
  matrix, ~29 GB). The whole ranking costs about 50 ns per (query, distinct reference) pair on
  one thread, quadratic in N, in memory bounded by
  ``memory_budget`` (256 MB by default).

In the gspdml vs PML tables gspdml computes its default metrics
(:func:`gspdml.evaluation.metric_registry.default_query_metrics`, of bounded depth), as PML with
``k="max_bin_count"`` does.

Each method runs in its own subprocess on the same saved arrays, so its peak memory is its own:
``peak MB`` is the process's peak RSS (VmHWM), ``+MB`` the growth of peak RSS during the metric
calls (after imports and loading); ``time s`` is the best of ``--repeats`` calls. PML is
``AccuracyCalculator(k="max_bin_count")`` with its default faiss kNN; gspdml is
:func:`gspdml.evaluation.retrieval_metrics` (exact: bf16/float32 candidates, certified float32 /
float64 re-ranking). The table also prints the largest absolute difference of MAP@R, P@1 and
R-precision and the speed ratio measured in the same run. ``--device cuda`` runs gspdml's search
on the GPU (the arrays are copied there inside the timed call; the results come back to the CPU);
PML keeps its own default (faiss on the CPU, or its GPU build where installed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

KEYS = {
    "map_at_r": "mean_average_precision_at_r",
    "precision_at_1": "precision_at_1",
    "r_precision": "r_precision",
}


def class_sizes(rng, num_classes, total, low, high, mean):
    """Class sizes in [low, high] with the given mean (binomial), adjusted to sum to ``total``."""
    p = (mean - low) / (high - low)
    sizes = low + rng.binomial(high - low, p, size=num_classes)
    while sizes.sum() != total:
        i = rng.integers(num_classes)
        step = 1 if sizes.sum() < total else -1
        if low <= sizes[i] + step <= high:
            sizes[i] += step
    return sizes


def clustered(rng, centres, labels, noise):
    x = centres[labels] + noise * rng.standard_normal(
        (len(labels), centres.shape[1]), dtype=np.float32
    )
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def unit_centres(rng, num, dim):
    c = rng.standard_normal((num, dim), dtype=np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def make_data(name, rng, dim=128, noise=0.14):
    if name == "sop":
        labels = np.repeat(np.arange(11316), class_sizes(rng, 11316, 60502, 2, 12, 5.35))
        return {
            "query": clustered(rng, unit_centres(rng, 11316, dim), labels, noise),
            "query_labels": labels,
        }
    if name == "inshop":
        centres = unit_centres(rng, 3985, dim)
        q_labels = np.repeat(np.arange(3985), class_sizes(rng, 3985, 14218, 1, 8, 14218 / 3985))
        g_labels = np.repeat(np.arange(3985), class_sizes(rng, 3985, 12612, 1, 8, 12612 / 3985))
        return {
            "query": clustered(rng, centres, q_labels, noise),
            "query_labels": q_labels,
            "reference": clustered(rng, centres, g_labels, noise),
            "reference_labels": g_labels,
        }
    if name == "million":
        labels = np.repeat(np.arange(100_000), class_sizes(rng, 100_000, 1_000_000, 5, 15, 10.0))
        return {
            "query": clustered(rng, unit_centres(rng, 100_000, dim), labels, noise),
            "query_labels": labels,
        }
    raise ValueError(name)


TIE_PATTERNS = ("equal", "two", "duplicated", "collapsed-1e-7", "collapsed-1e-5", "collapsed-1e-4")
#: gspdml's and PML's names of the whole-ranking metrics
WHOLE_KEYS = {
    "mean_average_precision": "mean_average_precision",
    "mean_reciprocal_rank": "mean_reciprocal_rank",
}


def sop_like_labels(rng, n):
    num_classes = round(n / 5.35)
    return np.repeat(
        np.arange(num_classes), class_sizes(rng, num_classes, n, 2, 12, n / num_classes)
    )


def make_ties(pattern, n, rng, dim=128):
    """One of TIE_PATTERNS at n rows (module docstring)."""
    if pattern == "duplicated":
        base = round(n / 2.5)
        copies = class_sizes(rng, base, n, 2, 3, 2.5)
        labels = sop_like_labels(rng, base)
        x = clustered(rng, unit_centres(rng, labels.max() + 1, dim), labels, 0.14)
        rows = rng.permutation(np.repeat(np.arange(base), copies))
        return {"query": x[rows], "query_labels": labels[rows]}
    points = unit_centres(rng, 2, dim)
    if pattern == "equal":
        x = np.repeat(points[:1], n, axis=0)
    elif pattern == "two":
        x = points[rng.integers(0, 2, n)]
    elif pattern.startswith("collapsed-"):
        noise = float(pattern.split("-", 1)[1])
        x = points[:1] + noise / math.sqrt(dim) * rng.standard_normal((n, dim), dtype=np.float32)
        x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    else:
        raise ValueError(pattern)
    return {"query": np.ascontiguousarray(x), "query_labels": sop_like_labels(rng, n)}


def run_ties(
    tmp: Path, rng, sizes, repeats, device="cpu", pml_memory_gb=8.0, patterns=TIE_PATTERNS
) -> None:
    """Per tie pattern and size: gspdml vs PML, bounded metrics and whole ranking (one row)."""
    header = (
        f"{'pattern':<15} {'N':>6} | {'gspdml s':>8} {'PML s':>7} {'ratio':>5} {'cpu s':>6} {'PML cpu s':>9} "
        f"{'ratio':>5} {'|diff|':>8} | "
        f"{'gspdml mAP s':>12} {'PML k=None s':>12} {'ratio':>5} {'|diff|':>8} {'mAP/PML bnd':>11}"
    )
    print(
        "bounded: MAP@R, P@1, R-precision (PML k=max_bin_count); ratio = PML / gspdml; "
        "cpu s: the processes' CPU time (less sensitive to a shared machine's load), its ratio"
    )
    print("whole ranking: mAP and MRR (PML k=None); mAP/PML bnd = gspdml whole / PML bounded")
    print(header)
    print("-" * len(header))
    for n in sizes:
        for pattern in TIE_PATTERNS:
            data = make_ties(pattern, n, rng)  # drawn for every pattern: the same arrays per row
            if pattern not in patterns:
                continue
            path = save(tmp / f"{pattern}-{n}", data)
            ours, pml = (launch(m, path, repeats, device=device) for m in ("gspdml", "pml"))
            whole = launch("gspdml-whole", path, repeats, device=device)
            diff = max(abs(ours["metrics"][key] - pml["metrics"][key]) for key in KEYS)
            pml_whole_gb = n * n * 24 / 2**30  # distances, indices, neighbour labels, masks
            if pml_whole_gb <= pml_memory_gb:
                theirs = launch("pml-whole", path, repeats, device=device)
                whole_diff = max(
                    abs(whole["metrics"][k] - theirs["metrics"][k]) for k in WHOLE_KEYS
                )
                pml_cells = (
                    f"{theirs['seconds']:12.2f} {theirs['seconds'] / whole['seconds']:5.1f} "
                    f"{whole_diff:8.2e}"
                )
            else:
                pml_cells = f"{f'not run: N^2 ~{pml_whole_gb:.0f} GB':>27}"
            print(
                f"{pattern:<15} {n:>6} | {ours['seconds']:8.2f} {pml['seconds']:7.2f} "
                f"{pml['seconds'] / ours['seconds']:5.1f} "
                f"{ours['cpu_seconds']:6.2f} {pml['cpu_seconds']:9.2f} "
                f"{pml['cpu_seconds'] / ours['cpu_seconds']:5.1f} {diff:8.2e} | "
                f"{whole['seconds']:12.2f} {pml_cells} "
                f"{whole['seconds'] / pml['seconds']:11.2f}",
                flush=True,
            )


def run_report(tmp: Path, rng, sizes, repeats) -> None:
    """The default report (with the whole-ranking mAP and MRR) vs a round's metrics (without)."""
    header = (
        f"{'N':>7} {'report s':>9} {'round s':>8} {'ratio':>6} {'report MB':>10} {'round MB':>9} "
        f"{'mAP':>8} {'MAP@R':>8}"
    )
    print(header)
    print("-" * len(header))
    for n in sizes:
        labels = sop_like_labels(rng, n)
        x = clustered(rng, unit_centres(rng, labels.max() + 1, 128), labels, 0.14)
        path = save(tmp / f"report-{n}", {"query": x, "query_labels": labels})
        full, bounded = (launch(m, path, repeats) for m in ("report", "round"))
        print(
            f"{n:>7} {full['seconds']:9.2f} {bounded['seconds']:8.2f} "
            f"{full['seconds'] / bounded['seconds']:6.2f} {full['peak_mb']:10.0f} "
            f"{bounded['peak_mb']:9.0f} {full['metrics']['mean_average_precision']:8.5f} "
            f"{full['metrics']['map_at_r']:8.5f}",
            flush=True,
        )


def max_rss_mb() -> float:
    """Peak resident memory of this process (VmHWM: unlike ru_maxrss it does not include the
    parent's memory at fork time)."""
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024.0


def worker(method: str, path: str, repeats: int, queries: int, device: str) -> None:
    import torch

    data = {f.stem: np.load(f) for f in Path(path).glob("*.npy")}
    if queries:  # the first rows against all rows: query/gallery mode, cost of leave-one-out
        data = {
            "query": data["query"][:queries],
            "query_labels": data["query_labels"][:queries],
            "reference": data["query"],
            "reference_labels": data["query_labels"],
        }
    if method == "gspdml":
        from gspdml.evaluation import retrieval_metrics

        def run():  # the default metrics: MAP@R, P@1, R-precision, Recall@1
            return retrieval_metrics(**data, recall_at=(1,), device=device)
    elif method == "gspdml-whole":
        from gspdml.evaluation import retrieval_metrics

        def run():
            return retrieval_metrics(**data, metrics=tuple(WHOLE_KEYS), device=device)
    elif method in ("report", "round"):
        from gspdml.evaluation.selection import round_metrics
        from gspdml.evaluation.service import EvalSpec, evaluate_embeddings

        names = round_metrics()
        if method == "report":  # the round's metrics and the whole-ranking ones, named
            names = (*names, *WHOLE_KEYS)
        spec = EvalSpec(metrics=names, recall_at=(1,))

        def run():
            return evaluate_embeddings(data["query"], data["query_labels"], spec=spec).metrics
    else:
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

        names = WHOLE_KEYS if method == "pml-whole" else KEYS
        k = None if method == "pml-whole" else "max_bin_count"
        calc = AccuracyCalculator(include=tuple(names.values()), k=k)

        def run():
            out = calc.get_accuracy(
                data["query"],
                data["query_labels"],
                data.get("reference"),
                data.get("reference_labels"),
            )
            return {ours: out[theirs] for ours, theirs in names.items()}

    torch.zeros(1)  # torch initialised before the baseline
    before = max_rss_mb()
    seconds = cpu_seconds = math.inf
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        metrics = run()
        seconds = min(seconds, time.perf_counter() - start)
        cpu_seconds = min(cpu_seconds, time.process_time() - cpu_start)
    peak = max_rss_mb()
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu_seconds": cpu_seconds,
                "peak_mb": peak,
                "delta_mb": peak - before,
                "metrics": {k: metrics[k] for k in (*KEYS, *WHOLE_KEYS) if k in metrics},
            }
        )
    )


def launch(method: str, path: Path, repeats: int, queries: int = 0, device: str = "cpu") -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    command = [
        sys.executable,
        __file__,
        "--worker",
        method,
        str(path),
        str(repeats),
        str(queries),
        device,
    ]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--datasets", nargs="*", default=["sop", "inshop"], choices=["sop", "inshop"]
    )
    parser.add_argument("--repeats", type=int, default=3, help="time = best of this many calls")
    parser.add_argument(
        "--million", action="store_true", help="also run 1,000,000 x 128 leave-one-out (gspdml)"
    )
    parser.add_argument(
        "--million-queries",
        type=int,
        default=0,
        help="search only this many rows against the 1M and extrapolate (0: all)",
    )
    parser.add_argument("--ties", action="store_true", help="tied / near-tied embeddings table")
    parser.add_argument("--tie-sizes", nargs="+", type=int, default=[5_000, 60_000])
    parser.add_argument(
        "--tie-patterns", nargs="+", choices=TIE_PATTERNS, default=list(TIE_PATTERNS)
    )
    parser.add_argument(
        "--pml-memory-gb",
        type=float,
        default=8.0,
        help="run PML's whole ranking (k=None, N^2 in memory) only up to about this much",
    )
    parser.add_argument(
        "--report", action="store_true", help="default report with vs without mAP and MRR"
    )
    parser.add_argument("--report-sizes", nargs="+", type=int, default=[20_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="where gspdml searches: cpu or cuda[:i]")
    parser.add_argument(
        "--worker",
        nargs=5,
        metavar=("METHOD", "DIR", "REPEATS", "QUERIES", "DEVICE"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args()
    if args.worker:
        method, path, repeats, queries, device = args.worker
        worker(method, path, int(repeats), int(queries), device)
        return
    rng = np.random.default_rng(args.seed)
    print(f"gspdml searches on {describe_device(args.device)}")
    if args.ties:
        with tempfile.TemporaryDirectory() as tmp:
            run_ties(
                Path(tmp),
                rng,
                args.tie_sizes,
                args.repeats,
                args.device,
                args.pml_memory_gb,
                args.tie_patterns,
            )
    if args.report:
        with tempfile.TemporaryDirectory() as tmp:
            run_report(Path(tmp), rng, args.report_sizes, args.repeats)
    if args.ties or args.report:
        if not args.datasets and not args.million:
            return
    header = f"{'data':<8} {'method':<7} {'time s':>8} {'peak MB':>8} {'+MB':>7} {'MAP@R':>8} {'P@1':>8} {'R-prec':>8}"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets:
            path = save(Path(tmp) / name, make_data(name, rng))
            results = {
                m: launch(m, path, args.repeats, device=args.device) for m in ("gspdml", "pml")
            }
            for m, r in results.items():
                print_row(name, m, r)
            diff = max(
                abs(results["gspdml"]["metrics"][k] - results["pml"]["metrics"][k]) for k in KEYS
            )
            speed = results["pml"]["seconds"] / results["gspdml"]["seconds"]
            print(
                f"{name:<8} max |metric difference| = {diff:.2e}; gspdml is {speed:.2f}x faster than PML",
                flush=True,
            )
        if args.million:
            path = save(Path(tmp) / "million", make_data("million", rng))
            r = launch("gspdml", path, 1, args.million_queries, args.device)
            print_row("million", "gspdml", r)
            if args.million_queries:
                full = r["seconds"] * 1_000_000 / args.million_queries
                print(
                    f"million  {args.million_queries:,} of 1,000,000 queries against all 1,000,000 in "
                    f"{r['seconds']:.1f} s -> extrapolated full leave-one-out run: {full:.0f} s "
                    f"({full / 60:.1f} min)",
                    flush=True,
                )


def describe_device(name: str) -> str:
    """``cpu (N threads)`` or ``cuda:i (GPU name)``; importing torch here, not at module level,
    keeps the parent process light (the workers import it)."""
    import torch

    device = torch.device(name)
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"{device} ({torch.get_num_threads()} threads)"


def save(folder: Path, data: dict) -> Path:
    """One .npy per array (loaded without the transient copy of an .npz)."""
    folder.mkdir()
    for key, value in data.items():
        np.save(folder / f"{key}.npy", value)
    return folder


def print_row(name, method, r):
    mt = r["metrics"]
    print(
        f"{name:<8} {method:<7} {r['seconds']:8.2f} {r['peak_mb']:8.0f} {r['delta_mb']:7.0f} "
        f"{mt['map_at_r']:8.5f} {mt['precision_at_1']:8.5f} {mt['r_precision']:8.5f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
