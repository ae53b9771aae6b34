"""The approximate-search options of ``gspdml index`` (``--backend ivf|ivfpq|hnsw``, its build
settings and the recall measured) and ``gspdml search`` (``--nprobe``, ``--ef``, ``--exact``):
argument parsing only (:mod:`gspdml.retrieval.approximate` does the work)."""

from __future__ import annotations

import argparse

from gspdml.retrieval import ann
from gspdml.retrieval.approximate import AnnRequest
from gspdml.retrieval.index import EXACT


def add_index_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("approximate search")
    group.add_argument(
        "--backend",
        choices=(EXACT, *ann.BACKENDS),
        default=None,
        help="also build a faiss index: ivf, ivfpq or hnsw (default: exact only; with --append: the index's own)",
    )
    group.add_argument("--nlist", type=int, help="ivf/ivfpq: number of cells (default ~4 sqrt(N))")
    defaults = AnnRequest  # the settings' defaults live in one place
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
        "--recall-k",
        type=int,
        default=defaults.recall_k,
        help="k of the recall measured at build (default %(default)s)",
    )
    group.add_argument(
        "--recall-sample",
        type=int,
        default=defaults.recall_sample,
        help="held-out indexed vectors the recall is measured on (default %(default)s)",
    )


def add_search_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("approximate search")
    _add_search_knobs(group)
    group.add_argument(
        "--exact",
        action="store_true",
        help="search the exact vectors even if the index has an approximate one",
    )


def _add_search_knobs(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--nprobe",
        type=int,
        help="ivf/ivfpq: cells scanned per query (more: slower, higher recall)",
    )
    group.add_argument(
        "--ef", type=int, help="hnsw: candidates explored per query (more: slower, higher recall)"
    )
