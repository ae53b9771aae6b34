"""``gspdml search --postprocess STEP`` (:mod:`gspdml.cli.retrieval`): post-processing of :mod:`gspdml.evaluation.postprocess`
(PCA-whitening, alpha-DBA, alpha-QE, k-reciprocal re-ranking) on an index search.

The index vectors are the database (DBA augments them for this search only, the index file is
not changed); PCA-whitening learns on the run's training split, embedded for the search.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Mapping, Optional, Sequence

import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.postprocess import (
    STEPS,
    needs_training_embeddings,
    parse_steps,
    postprocessed_retrieve,
)
from gspdml.evaluation.results import RetrievalResults
from gspdml.models import Embedder
from gspdml.models.inference import embed
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.sources import split_source


def add_search_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--postprocess",
        action="append",
        default=[],
        metavar="STEP",
        help=f"post-processing step NAME[:key=value,...], repeatable; NAME in {', '.join(STEPS)} (e.g. qe:k=2,alpha=3)",
    )


def postprocessed_search(
    index: RetrievalIndex,
    queries: torch.Tensor,
    k: int,
    query_paths: Sequence[str],
    args: argparse.Namespace,
    config: Mapping[str, Any],
    model: Embedder,
    device: torch.device | str,
) -> Optional[RetrievalResults]:
    """Results of the exact search after ``args.postprocess`` (distances: squared Euclidean of the
    processed unit vectors, or d* after k-reciprocal re-ranking), or None without steps."""
    if not args.postprocess:
        return None
    steps = parse_steps(args.postprocess, "--postprocess")
    if args.nprobe is not None or args.ef is not None:
        raise ConfigError(
            "--postprocess",
            "post-processing searches the exact vectors; it cannot be combined with --nprobe or --ef",
        )
    train = None
    if needs_training_embeddings(steps):
        train = embed(model, split_source(config, "train").dataset, args.batch_size, device)[0]
    results = postprocessed_retrieve(
        queries,
        [None] * len(queries),
        index.vectors,
        index.labels,
        steps=steps,
        train=train,
        min_k=k,
    )
    keep = slice(0, k)
    return dataclasses.replace(
        results,
        indices=results.indices[:, keep],
        distances=results.distances[:, keep],
        query_paths=tuple(query_paths),
        reference_paths=tuple(index.paths),
    )
