"""Retrieval post-processing: MAP@R / P@1 with and without each step, and its time.

    PYTHONPATH=src python benchmarks/postprocess.py [--run RUN_DIR] [--skip-sop]

Data sets:

* ``collage``: the test split of a trained collage run (``--run``, e.g. ``gspdml train
  demo-gsp``), leave-one-out; PCA-whitening learns on the embeddings of its training split;
* ``sop-syn``: the SOP-sized synthetic set of ``benchmarks/evaluation.py`` (60,502 x 128,
  11,316 classes, leave-one-out) plus a 30,000-vector training set from other classes of the same
  generator for the whitening. At this size the full 60,502 x 60,502 matrix (29 GB in float64)
  is never formed: every step searches with the exact engine; ``peak MB`` shows it.

Each row runs :func:`gspdml.evaluation.postprocess.postprocessed_retrieve` with one step (or
none, or all) and scores it with :func:`gspdml.evaluation.metrics.metrics_from_results`; ``time
s`` covers the post-processing and the search, ``peak MB`` is this process's peak resident
memory so far (monotone: rows are run in order).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from evaluation import class_sizes, clustered, make_data, max_rss_mb, unit_centres

ROWS = {
    "none": [],
    "pca_whiten": ["pca_whiten"],
    "dba (k=2, a=3)": ["dba"],
    "qe (k=2, a=3)": ["qe"],
    "k-reciprocal (20, 6, 0.3)": ["k_reciprocal"],
    "dba + qe": ["dba", "qe"],
    "pca_whiten + dba + qe": ["pca_whiten", "dba", "qe"],
}


def sop_synthetic(seed: int):
    rng = np.random.default_rng(seed)
    data = make_data("sop", rng)
    labels = np.repeat(np.arange(5000), class_sizes(rng, 5000, 30_000, 2, 12, 6.0))
    train = clustered(rng, unit_centres(rng, 5000, 128), labels, 0.14)
    return data["query"], data["query_labels"], train


def collage(run_dir: str):
    from gspdml.data import build_data
    from gspdml.models.inference import embed
    from gspdml.training import load_run

    config, model = load_run(run_dir)
    data = build_data(config.data.dataset, seed=config.seed)
    query, labels = embed(model, data.test.query, 256)
    train, _ = embed(model, data.train, 256)
    return query.numpy(), labels.numpy(), train.numpy()


def table(name: str, query, labels, train) -> None:
    from gspdml.evaluation.metrics import metrics_from_results
    from gspdml.evaluation.postprocess import postprocessed_retrieve

    for row, steps in ROWS.items():
        start = time.perf_counter()
        results = postprocessed_retrieve(query, labels, steps=steps, train=train, min_k=1)
        seconds = time.perf_counter() - start
        m = metrics_from_results(results, recall_at=(1,))
        print(
            f"{name:<9} {row:<26} {m['map_at_r']:8.4f} {m['precision_at_1']:8.4f} {seconds:8.1f} {max_rss_mb():8.0f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--run", help="a trained collage run directory (skip the collage rows without it)"
    )
    parser.add_argument("--skip-sop", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    header = (
        f"{'data':<9} {'post-processing':<26} {'MAP@R':>8} {'P@1':>8} {'time s':>8} {'peak MB':>8}"
    )
    print(header)
    print("-" * len(header), flush=True)
    if args.run:
        table("collage", *collage(args.run))
    if not args.skip_sop:
        table("sop-syn", *sop_synthetic(args.seed))


if __name__ == "__main__":
    main()
