"""The approximate-search options of ``gspdml index`` and ``gspdml search`` (:mod:`gspdml.cli.retrieval`)
over :mod:`gspdml.retrieval.ann`.

``gspdml index --backend ivf|ivfpq|hnsw`` builds an approximate index next to the exact vectors
of an index folder and measures its recall@k against the exact engine; ``--append`` adds the new
rows to it (no retraining) and re-measures. ``gspdml search`` uses it when present (``--exact``
to bypass it), with ``--nprobe`` / ``--ef`` overriding the stored search setting, and prints the
measured recall.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.evaluation.results import RetrievalResults
from gspdml.retrieval import ann
from gspdml.retrieval.index import RetrievalIndex

EXACT = "exact"


def add_index_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("approximate search")
    group.add_argument("--backend", choices=(EXACT, *ann.BACKENDS), default=None,
                       help="also build a faiss index: ivf, ivfpq or hnsw (default: exact only; with --append: the index's own)")
    group.add_argument("--nlist", type=int, help="ivf/ivfpq: number of cells (default ~4 sqrt(N))")
    defaults = ann.AnnParams  # the build settings' defaults live in one place
    group.add_argument("--train-per-list", type=int, default=defaults.train_per_list, help="ivf/ivfpq: k-means training vectors per cell (default %(default)s)")
    group.add_argument("--kmeans-iters", type=int, default=defaults.kmeans_iters, help="ivf/ivfpq: k-means iterations (default %(default)s)")
    group.add_argument("--pq-m", type=int, help="ivfpq: bytes per vector (default dim / 4)")
    group.add_argument("--hnsw-m", type=int, default=defaults.hnsw_m, help="hnsw: graph degree (default %(default)s)")
    group.add_argument("--ef-construction", type=int, default=defaults.ef_construction, help="hnsw: candidates while building (default %(default)s)")
    _add_search_knobs(group)
    group.add_argument("--recall-k", type=int, default=10, help="k of the recall measured at build (default 10)")
    group.add_argument("--recall-sample", type=int, default=1000, help="held-out indexed vectors the recall is measured on (default 1000)")


def add_search_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("approximate search")
    _add_search_knobs(group)
    group.add_argument("--exact", action="store_true", help="search the exact vectors even if the index has an approximate one")


def _add_search_knobs(group) -> None:
    group.add_argument("--nprobe", type=int, help="ivf/ivfpq: cells scanned per query (more: slower, higher recall)")
    group.add_argument("--ef", type=int, help="hnsw: candidates explored per query (more: slower, higher recall)")


def _vectors(index: RetrievalIndex) -> torch.Tensor:
    """What the approximate index stores: unit vectors for cosine, the vectors otherwise."""
    return F.normalize(index.vectors, dim=1) if index.metric == "cosine" else index.vectors


def _with_knobs(params: ann.AnnParams, args) -> ann.AnnParams:
    knobs = {key: value for key, value in (("nprobe", args.nprobe), ("ef", args.ef)) if value is not None}
    return replace(params, **knobs)


def update_ann(index: RetrievalIndex, out: Path, args, added: int) -> str:
    """Build, grow or drop the approximate index of the folder ``out`` after ``index`` was
    saved there; returns a line for the user ('' when there is nothing to say). An append whose
    approximate index no longer lines up with the rows it started from (vanished files dropped,
    or rows saved after a failed run) rebuilds it with its stored settings."""
    described = ann.read_description(out) if args.append else None
    if described is not None and described[0].get("count") != len(index) - added:
        if args.backend not in (None, described[1].backend):
            raise ConfigError("--backend", f"{out} holds a {described[1].backend} index; --append cannot change it to {args.backend}")
        built = ann.build_measured(_vectors(index), _with_knobs(described[1], args), args.recall_k, args.recall_sample)
        built.save(out)
        return built.describe()
    if args.append:
        existing = ann.AnnIndex.load(out, len(index) - added, mmap=False)
        if existing is None:
            if args.backend not in (None, EXACT):
                raise ConfigError("--backend", f"{out} has no approximate index to append to; rebuild with --overwrite --backend {args.backend}")
            return ""
        if args.backend not in (None, existing.params.backend):
            raise ConfigError("--backend", f"{out} holds a {existing.params.backend} index; --append cannot change it to {args.backend}")
        existing.params = _with_knobs(existing.params, args)
        ann.append_measured(existing, _vectors(index), added, args.recall_k, args.recall_sample)
        existing.save(out)
        return existing.describe()
    if args.backend in (None, EXACT):
        for name in (ann.ANN_META, ann.ANN_FILE):  # a rebuilt exact index must not keep a stale one
            (out / name).unlink(missing_ok=True)
        return ""
    params = _with_knobs(ann.AnnParams(args.backend, nlist=args.nlist, train_per_list=args.train_per_list,
                                       kmeans_iters=args.kmeans_iters, pq_m=args.pq_m, hnsw_m=args.hnsw_m,
                                       ef_construction=args.ef_construction), args)
    built = ann.build_measured(_vectors(index), params, args.recall_k, args.recall_sample)
    built.save(out)
    return built.describe()


def approximate_search(index: RetrievalIndex, folder, queries: torch.Tensor, k: int, query_paths, args):
    """``(results, line)`` from the folder's approximate index, or None when it has none or
    ``--exact`` was given."""
    if args.exact:
        return None
    found = ann.AnnIndex.load(folder, len(index))
    if found is None:
        if args.nprobe is not None or args.ef is not None:
            raise ConfigError("--nprobe" if args.nprobe is not None else "--ef", f"{folder} has no approximate index (build one with gspdml index --backend)")
        return None
    found.params = _with_knobs(found.params, args)
    if index.metric == "cosine":
        queries = F.normalize(queries.float(), dim=1)
    squared, rows = ann.search(found.index, found.params, queries, k, vectors=_vectors(index))
    if (rows < 0).any():
        query = int((rows < 0).any(1).nonzero()[0, 0])
        raise ConfigError("--nprobe", f"the approximate index found fewer than {k} neighbours for query {query_paths[query]}; raise --nprobe or search with --exact")
    distances = squared / 2.0 if index.metric == "cosine" else squared.clamp(min=0).sqrt()
    results = RetrievalResults.from_labels(
        rows, distances.float(), [None] * len(rows), index.labels, metric=index.metric,
        query_paths=query_paths, reference_paths=index.paths,
    )
    return results, found.describe()
