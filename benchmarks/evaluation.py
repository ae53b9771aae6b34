"""Exact retrieval metrics: gspdml vs pytorch-metric-learning on SOP- and In-Shop-sized data.

    PYTHONPATH=src python benchmarks/evaluation.py [--datasets sop inshop million] [--seed 0]

Synthetic clustered embeddings (unit class centres + Gaussian noise, L2-normalised, float32):

- ``sop``: 60,502 x 128 leave-one-out, 11,316 classes of 2-12 images (mean 5.35, as SOP test);
- ``inshop``: 14,218 queries x 12,612 gallery, 3,985 classes (as In-Shop test);
- ``million``: 20,000 queries against 1,000,000 x 128 references (gspdml only; bounded memory).

Each method runs in its own subprocess on the same saved arrays, so its peak memory is its own:
``peak MB`` is the process's max RSS, ``+MB`` the growth of max RSS during the metric call (after
imports and loading). PML is ``AccuracyCalculator(k="max_bin_count")`` with its default faiss kNN;
gspdml is :func:`gspdml.evaluation.retrieval_metrics` (exact, bf16/float32 candidates + float64
re-ranking). The table also prints the largest absolute difference of MAP@R, P@1 and R-precision.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

KEYS = {"map_at_r": "mean_average_precision_at_r", "precision_at_1": "precision_at_1", "r_precision": "r_precision"}


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
    x = centres[labels] + noise * rng.standard_normal((len(labels), centres.shape[1]), dtype=np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def unit_centres(rng, num, dim):
    c = rng.standard_normal((num, dim), dtype=np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def make_data(name, rng, dim=128, noise=0.14):
    if name == "sop":
        labels = np.repeat(np.arange(11316), class_sizes(rng, 11316, 60502, 2, 12, 5.35))
        return {"query": clustered(rng, unit_centres(rng, 11316, dim), labels, noise), "query_labels": labels}
    if name == "inshop":
        centres = unit_centres(rng, 3985, dim)
        q_labels = np.repeat(np.arange(3985), class_sizes(rng, 3985, 14218, 1, 8, 14218 / 3985))
        g_labels = np.repeat(np.arange(3985), class_sizes(rng, 3985, 12612, 1, 8, 12612 / 3985))
        return {"query": clustered(rng, centres, q_labels, noise), "query_labels": q_labels,
                "reference": clustered(rng, centres, g_labels, noise), "reference_labels": g_labels}
    if name == "million":
        num_classes = 1_000_000 // 6
        centres = unit_centres(rng, num_classes, dim)
        g_labels = np.repeat(np.arange(num_classes), class_sizes(rng, num_classes, 1_000_000, 2, 10, 6.0))
        q_labels = rng.integers(0, num_classes, 20_000)
        return {"query": clustered(rng, centres, q_labels, noise), "query_labels": q_labels,
                "reference": clustered(rng, centres, g_labels, noise), "reference_labels": g_labels}
    raise ValueError(name)


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def worker(method: str, path: str) -> None:
    import torch

    with np.load(path) as f:
        data = {k: f[k] for k in f.files}
    if method == "gspdml":
        from gspdml.evaluation import retrieval_metrics

        def run():
            return retrieval_metrics(**data, recall_at=(1,))
    else:
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

        calc = AccuracyCalculator(include=tuple(KEYS.values()), k="max_bin_count")

        def run():
            out = calc.get_accuracy(data["query"], data["query_labels"], data.get("reference"), data.get("reference_labels"))
            return {ours: out[theirs] for ours, theirs in KEYS.items()}

    torch.zeros(1)  # torch initialised before the baseline
    before = max_rss_mb()
    start = time.perf_counter()
    metrics = run()
    seconds = time.perf_counter() - start
    peak = max_rss_mb()
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "delta_mb": peak - before,
                      "metrics": {k: metrics[k] for k in KEYS}}))


def launch(method: str, path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = subprocess.run([sys.executable, __file__, "--worker", method, str(path)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["sop", "inshop", "million"], choices=["sop", "inshop", "million"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "NPZ"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    rng = np.random.default_rng(args.seed)
    header = f"{'data':<8} {'method':<7} {'time s':>8} {'peak MB':>8} {'+MB':>7} {'MAP@R':>8} {'P@1':>8} {'R-prec':>8}"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets:
            path = Path(tmp) / f"{name}.npz"
            np.savez(path, **make_data(name, rng))
            methods = ["gspdml"] if name == "million" else ["gspdml", "pml"]
            results = {m: launch(m, path) for m in methods}
            for m, r in results.items():
                mt = r["metrics"]
                print(f"{name:<8} {m:<7} {r['seconds']:8.2f} {r['peak_mb']:8.0f} {r['delta_mb']:7.0f} "
                      f"{mt['map_at_r']:8.5f} {mt['precision_at_1']:8.5f} {mt['r_precision']:8.5f}", flush=True)
            if "pml" in results:
                diff = max(abs(results["gspdml"]["metrics"][k] - results["pml"]["metrics"][k]) for k in KEYS)
                speed = results["pml"]["seconds"] / results["gspdml"]["seconds"]
                print(f"{name:<8} max |metric difference| = {diff:.2e}; gspdml is {speed:.2f}x faster than PML", flush=True)


if __name__ == "__main__":
    main()
