"""The approximate-search options of ``gspdml index`` and ``gspdml search``
(:mod:`gspdml.cli.retrieval`): argument parsing only; the index does the work
(:meth:`gspdml.retrieval.index.RetrievalIndex.build_approximate`, ``update_approximate``,
``tune_approximate``, ``search``; the structures of :mod:`gspdml.retrieval.ann`).

``gspdml index --backend ivf|ivfpq|hnsw`` builds an approximate index next to the exact vectors
of an index folder and measures its recall@k against the exact engine; ``--append`` adds the new
rows to it (no retraining; rebuilt with its settings when rows were dropped) and re-measures.
``gspdml search`` uses it when present (``--exact`` to bypass it), with ``--nprobe`` / ``--ef``
overriding the stored search setting, and prints the measured recall.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from gspdml.errors import ConfigError
from gspdml.retrieval import ann
from gspdml.retrieval.index import EXACT, RetrievalIndex


def add_index_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("approximate search")
    group.add_argument(
        "--backend",
        choices=(EXACT, *ann.BACKENDS),
        default=None,
        help="also build a faiss index: ivf, ivfpq or hnsw (default: exact only; with --append: the index's own)",
    )
    group.add_argument("--nlist", type=int, help="ivf/ivfpq: number of cells (default ~4 sqrt(N))")
    defaults = ann.AnnParams  # the build settings' defaults live in one place
    group.add_argument(
        "--train-per-list",
        type=int,
        default=defaults.train_per_list,
        help="ivf/ivfpq: k-means training vectors per cell (default %(default)s)",
    )
    group.add_argument(
        "--kmeans-iters",
        type=int,
        default=defaults.kmeans_iters,
        help="ivf/ivfpq: k-means iterations (default %(default)s)",
    )
    group.add_argument("--pq-m", type=int, help="ivfpq: bytes per vector (default dim / 4)")
    group.add_argument(
        "--hnsw-m",
        type=int,
        default=defaults.hnsw_m,
        help="hnsw: graph degree (default %(default)s)",
    )
    group.add_argument(
        "--ef-construction",
        type=int,
        default=defaults.ef_construction,
        help="hnsw: candidates while building (default %(default)s)",
    )
    _add_search_knobs(group)
    group.add_argument(
        "--recall-k", type=int, default=10, help="k of the recall measured at build (default 10)"
    )
    group.add_argument(
        "--recall-sample",
        type=int,
        default=1000,
        help="held-out indexed vectors the recall is measured on (default 1000)",
    )


def add_search_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("approximate search")
    _add_search_knobs(group)
    group.add_argument(
        "--exact",
        action="store_true",
        help="search the exact vectors even if the index has an approximate one",
    )


def _add_search_knobs(group) -> None:
    group.add_argument(
        "--nprobe",
        type=int,
        help="ivf/ivfpq: cells scanned per query (more: slower, higher recall)",
    )
    group.add_argument(
        "--ef", type=int, help="hnsw: candidates explored per query (more: slower, higher recall)"
    )


def update_ann(index: RetrievalIndex, out: Path, args) -> str:
    """Build, grow or drop the approximate structure of ``index`` (to be saved in the folder
    ``out`` with the rest of it) as the options ask, through the index's own methods; returns a
    line for the user ('' when there is nothing to say)."""
    knobs = {
        key: value for key, value in (("nprobe", args.nprobe), ("ef", args.ef)) if value is not None
    }
    if not args.append:
        if args.backend in (None, EXACT):
            index.build_approximate(EXACT)
            return ""
        params = ann.AnnParams(
            args.backend,
            nlist=args.nlist,
            train_per_list=args.train_per_list,
            kmeans_iters=args.kmeans_iters,
            pq_m=args.pq_m,
            hnsw_m=args.hnsw_m,
            ef_construction=args.ef_construction,
            **knobs,
        )
        built = index.build_approximate(
            params, recall_k=args.recall_k, recall_sample=args.recall_sample
        )
    else:
        existing = index.approximate
        if existing is None:
            if args.backend not in (None, EXACT):
                raise ConfigError(
                    "--backend",
                    f"{out} has no approximate index to append to; "
                    f"rebuild with --overwrite --backend {args.backend}",
                )
            return ""
        if args.backend not in (None, existing.params.backend):
            raise ConfigError(
                "--backend",
                f"{out} holds a {existing.params.backend} index; "
                f"--append cannot change it to {args.backend}",
            )
        index.tune_approximate(**knobs)
        built = index.update_approximate(args.recall_k, args.recall_sample)
    return built.describe()


def approximate_search(
    index: RetrievalIndex, folder, queries: torch.Tensor, k: int, query_paths, args
):
    """``(results, line)`` of the index's approximate structure (with ``--nprobe`` / ``--ef``),
    or None when it has none or ``--exact`` was given."""
    if args.exact:
        return None
    if index.approximate is None:
        if args.nprobe is not None or args.ef is not None:
            raise ConfigError(
                "--nprobe" if args.nprobe is not None else "--ef",
                f"{folder} has no approximate index (build one with gspdml index --backend)",
            )
        return None
    index.tune_approximate(nprobe=args.nprobe, ef=args.ef)
    return index.search(queries, k, query_paths=query_paths), index.approximate.describe()
