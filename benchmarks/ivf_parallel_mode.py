"""Inverted-file search in faiss's default parallel mode 0 against the mode 3 of ``gspdml.retrieval.ann``.

    PYTHONPATH=src python benchmarks/ivf_parallel_mode.py [--size 1000000] [--nlists 2000 8000 20000]
        [--nprobes 1 8] [--repeats 3]

In mode 0 faiss's ``IndexIVF.search`` splits the queries over its threads and runs the coarse
quantiser (a BLAS product of the queries with the centroids) inside each slice; in mode 3 it runs
the quantiser on all queries first and then splits the cell scans over the queries. Both return
the same neighbours (the ``same`` column checks it on every row). Data: the clustered vectors of
``benchmarks/search.py`` (same generator and cache folder), 1,000 queries, k = 10. The inverted
files are built by ``ann.build`` with a cheap k-means (4 vectors per cell, 3 rounds): the timing
does not depend on the quality of the cells.

Columns: q/s in mode 0 with the machine's threads and with 1 thread, q/s of ``ann.search`` (mode
3) with the machine's threads, and its speed over mode 0's (best of ``--repeats`` searches each,
all in one process).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from search import RowFile, make_data


def best_qps(search, queries: np.ndarray, repeats: int) -> tuple[float, np.ndarray]:
    times, rows = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        rows = search(queries)
        times.append(time.perf_counter() - start)
    return len(queries) / min(times), rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--nlists", type=int, nargs="+", default=[2000, 8000, 20000])
    parser.add_argument("--nprobes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gspdml-search-bench"))
    args = parser.parse_args()

    import faiss

    from gspdml.retrieval import ann

    path = make_data(args.workdir, args.size, 1000, seed=0)
    base, queries = RowFile(path / "base.npy"), np.load(path / "queries.npy")
    threads = faiss.omp_get_max_threads()
    header = f"{'nlist':>6} {'nprobe':>6} {'mode 0':>9} {'1 thread':>9} {'mode 3':>9} {'ratio':>6} {'same':>5}"
    print(f"{args.size} x 128, {threads} threads\n{header}\n{'-' * len(header)}", flush=True)
    for nlist in args.nlists:
        params = ann.AnnParams("ivf", nlist=nlist, train_per_list=4, kmeans_iters=3)
        index = ann.build(base, params)
        for nprobe in args.nprobes:
            params.nprobe = nprobe
            ann.configure(index, params)
            faiss.extract_index_ivf(index).parallel_mode = 0
            mode0, mode0_rows = best_qps(lambda q: index.search(q, 10)[1], queries, args.repeats)
            faiss.omp_set_num_threads(1)
            single, _ = best_qps(lambda q: index.search(q, 10)[1], queries, args.repeats)
            faiss.omp_set_num_threads(threads)
            mode3, mode3_rows = best_qps(
                lambda q: ann.search(index, params, q, 10)[1].numpy(), queries, args.repeats
            )
            same = bool((mode0_rows == mode3_rows).all())
            print(
                f"{nlist:>6} {nprobe:>6} {mode0:9.0f} {single:9.0f} {mode3:9.0f} {mode3 / mode0:5.1f}x {str(same):>5}",
                flush=True,
            )


if __name__ == "__main__":
    main()
