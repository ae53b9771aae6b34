"""``gspdml search --postprocess STEP``: the steps of :mod:`gspdml.evaluation.postprocess`,
applied by :meth:`gspdml.retrieval.index.RetrievalIndex.search` (the index file is not changed;
PCA-whitening learns on the run's training split, embedded for the search).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Optional

import torch

from gspdml.config import RunConfig
from gspdml.errors import ConfigError
from gspdml.evaluation.postprocess import POSTPROCESSORS, build_steps
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
        help=f"post-processing step NAME[:key=value,...], repeatable; NAME in {', '.join(POSTPROCESSORS.names())} (e.g. qe:k=2,alpha=3)",
    )


def postprocessed_search(
    index: RetrievalIndex,
    queries: torch.Tensor,
    k: int,
    query_paths: Sequence[str],
    args: argparse.Namespace,
    config: RunConfig,
    model: Embedder,
    device: torch.device | str,
) -> Optional[RetrievalResults]:
    """The index's search with the steps of ``args.postprocess``, or None without steps."""
    if not args.postprocess:
        return None
    steps = build_steps(args.postprocess, "--postprocess")
    if args.nprobe is not None or args.ef is not None:
        raise ConfigError(
            "--postprocess",
            "post-processing searches the exact vectors; it cannot be combined with --nprobe or --ef",
        )
    train = None
    if any(step.learns_on_training for step in steps):  # PCA-whitening
        train = embed(model, split_source(config, "train").dataset, args.batch_size, device)[0]
    return index.search(queries, k, query_paths=query_paths, postprocess=steps, train=train)
