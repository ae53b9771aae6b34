"""Approximate search (faiss ivf, ivfpq, hnsw) against the exact engine, on clustered vectors.

    PYTHONPATH=src python benchmarks/search.py [--sizes 1000000 10000000] [--queries 1000]
        [--hnsw-max 1000000] [--workdir /tmp] [--cells-per-thousand 12] [--train-per-list 16]
        [--kmeans-iters 4] [--hnsw-m 32] [--ef-construction 80] [--nprobes 1 2 4] [--efs 64 256]

Data: N x 128 float32 vectors around N / 100 Gaussian cluster centres (centres N(0, 1), noise
N(0, 0.8^2) per coordinate: a vector's 10 nearest neighbours are members of its own cluster of
about 100, squared distance ~164, while the centres themselves are random points in 128-d, with
nothing between them for a graph or a coarse cell to follow), generated in chunks from a seed
into a ``.npy`` file;
``--queries`` fresh vectors from the same mixture are the queries (not in the database).

Every method runs in its own subprocess, so that its peak memory (VmHWM, the peak resident set,
including the pages of any file it maps) is its own:

* ``exact``: :func:`gspdml.evaluation.exact_knn.knn` on the whole array (read into memory); its
  neighbours are the ground truth, so its recall is 1 by definition;
* ``ivf`` / ``ivfpq`` / ``hnsw``: :func:`gspdml.retrieval.ann.build` (training sample and chunks
  read from the file with ``pread``, not mapped, so the peak counts what the index holds, not the
  page cache of the data file), then one search per setting of the knob (``nprobe`` or ``ef``).
  By default the inverted files have 12 cells per thousand vectors (more cells than the data has
  clusters of 100: a cell that holds several clusters has its centroid between them, farther
  from their members than the nearest of many random centroids, and routes queries wrongly),
  trained by 4 k-means rounds on 16 vectors per cell; hnsw has M 32, efConstruction 80.

Columns: build s (training + adding), q/s (queries per second of one ``search`` call on all
queries, with the threads the machine has), recall@10 (|A ∩ E| / 10 against the exact engine's
neighbours), speed-up (q/s over the exact engine's q/s of the same run), peak MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from evaluation import max_rss_mb

DIM, K = 128, 10
CHUNK = 1 << 18
SETTINGS = {
    "ivf": ("nprobe", (1, 2, 4, 8, 16, 32)),
    "ivfpq": ("nprobe", (2, 4, 8, 16)),
    "hnsw": ("ef", (16, 32, 64, 128)),
}


class RowFile:
    """The rows of a float32 ``.npy`` matrix, read from the file on demand (slices, or sorted
    row numbers) with ``pread``: what ``ann.build`` needs, without mapping the file."""

    def __init__(self, path: Path):
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = {
                (1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0,
            }[version]
            shape, fortran, dtype = read_header(f)
            self.offset = f.tell()
        if fortran or dtype != np.float32 or len(shape) != 2:
            raise SystemExit(f"{path}: expected a C-ordered float32 matrix, got {dtype} {shape}")
        self.path, self.shape = path, shape
        self.row_bytes = shape[1] * 4

    def __len__(self) -> int:
        return self.shape[0]

    def _read(self, start: int, stop: int) -> np.ndarray:
        with open(self.path, "rb") as f:
            data = os.pread(
                f.fileno(), (stop - start) * self.row_bytes, self.offset + start * self.row_bytes
            )
        return np.frombuffer(data, dtype=np.float32).reshape(stop - start, self.shape[1])

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(len(self))
            return self._read(start, stop)
        rows = np.asarray(key)  # sorted row numbers: read chunk by chunk, keep the asked rows
        parts = []
        for start in range(0, len(self), CHUNK):
            lo, hi = np.searchsorted(rows, [start, start + CHUNK])
            if hi > lo:
                parts.append(self._read(start, min(start + CHUNK, len(self)))[rows[lo:hi] - start])
        return np.concatenate(parts)


def make_data(folder: Path, n: int, queries: int, seed: int) -> Path:
    """``base.npy`` [n, 128] and ``queries.npy``, chunk by chunk (bounded memory)."""
    path = folder / f"clustered100-s08-{n}-{seed}"
    if (path / "queries.npy").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 100), DIM), dtype=np.float32)

    def draw(count):
        return centres[rng.integers(0, len(centres), count)] + 0.8 * rng.standard_normal(
            (count, DIM), dtype=np.float32
        )

    base = np.lib.format.open_memmap(
        path / "base.tmp.npy", mode="w+", dtype=np.float32, shape=(n, DIM)
    )
    for start in range(0, n, CHUNK):
        base[start : start + CHUNK] = draw(min(CHUNK, n - start))
    base.flush()
    del base
    os.replace(path / "base.tmp.npy", path / "base.npy")
    np.save(path / "queries.npy", draw(queries))
    return path


def run_exact(path: Path) -> dict:
    import torch

    from gspdml.evaluation.exact_knn import knn

    base = torch.from_numpy(np.load(path / "base.npy"))
    queries = torch.from_numpy(np.load(path / "queries.npy"))
    start = time.perf_counter()
    _, rows = knn(queries, base, K)
    seconds = time.perf_counter() - start
    np.save(path / "truth.npy", rows.numpy())
    return {
        "build_s": 0.0,
        "rows": [{"setting": "-", "qps": len(queries) / seconds, "recall": 1.0}],
    }


def run_ann(path: Path, backend: str, options: dict) -> dict:
    import torch

    from gspdml.retrieval import ann

    base = RowFile(path / "base.npy")
    queries = np.load(path / "queries.npy")
    truth = np.load(path / "truth.npy")
    params = ann.AnnParams(
        backend,
        nlist=len(base) * options["cells_per_thousand"] // 1000,
        pq_m=32,
        train_per_list=options["train_per_list"],
        kmeans_iters=options["kmeans_iters"],
        hnsw_m=options["hnsw_m"],
        ef_construction=options["ef_construction"],
    )
    start = time.perf_counter()
    index = ann.build(base, params)
    build_s = time.perf_counter() - start
    stored = np.load(
        path / "base.npy", mmap_mode="c"
    )  # ivfpq re-ranking reads only its candidates' rows
    knob, values = SETTINGS[backend]
    values = options[knob] or values
    rows = []
    for value in values:
        setattr(params, knob, value)
        start = time.perf_counter()
        _, found = ann.search(index, params, queries, K, vectors=torch.from_numpy(stored))
        seconds = time.perf_counter() - start
        recall = np.mean([len(set(a) & set(e)) / K for a, e in zip(found.numpy(), truth)])
        rows.append(
            {"setting": f"{knob} {value}", "qps": len(queries) / seconds, "recall": float(recall)}
        )
    return {"build_s": build_s, "rows": rows}


def worker(method: str, path: str, options: str) -> None:
    result = (
        run_exact(Path(path))
        if method == "exact"
        else run_ann(Path(path), method, json.loads(options))
    )
    print(json.dumps({**result, "peak_mb": max_rss_mb()}))


def launch(method: str, path: Path, options: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", method, str(path), json.dumps(options)],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(f"{method} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument(
        "--backends", nargs="+", default=["ivf", "ivfpq", "hnsw"], choices=list(SETTINGS)
    )
    parser.add_argument(
        "--hnsw-max", type=int, default=1_000_000, help="build hnsw only up to this many vectors"
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gspdml-search-bench"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cells-per-thousand", type=int, default=12, help="ivf/ivfpq cells per 1,000 vectors"
    )
    parser.add_argument(
        "--train-per-list", type=int, default=16, help="ivf/ivfpq k-means training vectors per cell"
    )
    parser.add_argument("--kmeans-iters", type=int, default=4, help="ivf/ivfpq k-means rounds")
    parser.add_argument("--hnsw-m", type=int, default=32)
    parser.add_argument("--ef-construction", type=int, default=80)
    parser.add_argument(
        "--nprobes",
        type=int,
        nargs="+",
        help=f"ivf/ivfpq settings searched (default {SETTINGS['ivf'][1]} / {SETTINGS['ivfpq'][1]})",
    )
    parser.add_argument(
        "--efs", type=int, nargs="+", help=f"hnsw settings searched (default {SETTINGS['hnsw'][1]})"
    )
    parser.add_argument(
        "--worker", nargs=3, metavar=("METHOD", "DIR", "OPTIONS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    options = {
        "cells_per_thousand": args.cells_per_thousand,
        "train_per_list": args.train_per_list,
        "kmeans_iters": args.kmeans_iters,
        "hnsw_m": args.hnsw_m,
        "ef_construction": args.ef_construction,
        "nprobe": args.nprobes,
        "ef": args.efs,
    }
    header = f"{'N':>10} {'method':<7} {'setting':<11} {'build s':>8} {'q/s':>9} {'recall@10':>9} {'speed-up':>8} {'peak MB':>8}"
    print(header)
    print("-" * len(header), flush=True)
    for n in args.sizes:
        path = make_data(args.workdir, n, args.queries, args.seed)
        exact = launch("exact", path, options)
        base_qps = exact["rows"][0]["qps"]
        print_rows(n, "exact", exact, base_qps)
        for backend in args.backends:
            if backend == "hnsw" and n > args.hnsw_max:
                print(f"{n:>10} hnsw    not built: above --hnsw-max {args.hnsw_max}", flush=True)
                continue
            print_rows(n, backend, launch(backend, path, options), base_qps)


def print_rows(n: int, name: str, result: dict, base_qps: float) -> None:
    for row in result["rows"]:
        print(
            f"{n:>10} {name:<7} {row['setting']:<11} {result['build_s']:8.1f} {row['qps']:9.0f} "
            f"{row['recall']:9.4f} {row['qps'] / base_qps:7.1f}x {result['peak_mb']:8.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
