"""What ``gspdml index --backend`` and ``gspdml search --nprobe/--ef/--exact`` ask of the
approximate structure of an index (:mod:`gspdml.retrieval.ann`), as policies over
:class:`~gspdml.retrieval.index.RetrievalIndex`'s own methods.

Writing (:func:`update_ann`): a new index gets the structure :class:`AnnRequest` names (none for
``exact``) and its recall@k measured against the exact engine; an appended index keeps its own
backend (another one is refused), its new rows join the structure without retraining (rebuilt with
its settings when rows were dropped) and the recall is measured again. Searching
(:func:`search_approximate`): the structure answers unless ``exact`` is asked, with ``nprobe`` /
``ef`` overriding its stored search setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.results import RetrievalResults
from gspdml.retrieval.ann import RECALL_K, RECALL_SAMPLE, AnnParams
from gspdml.retrieval.index import EXACT, RetrievalIndex


@dataclass(frozen=True)
class AnnRequest:
    """The approximate structure asked of an index being written: ``backend`` (``ivf``,
    ``ivfpq``, ``hnsw``, ``exact``; None: exact for a new index, the index's own when
    appending), the build settings of :class:`~gspdml.retrieval.ann.AnnParams` (defaults: its
    own), the search knobs ``nprobe`` / ``ef`` (None: the structure's) and the recall@``recall_k``
    measured on ``recall_sample`` held-out indexed vectors."""

    backend: Optional[str] = None
    nlist: Optional[int] = None
    train_per_list: int = AnnParams.train_per_list
    kmeans_iters: int = AnnParams.kmeans_iters
    pq_m: Optional[int] = None
    hnsw_m: int = AnnParams.hnsw_m
    ef_construction: int = AnnParams.ef_construction
    nprobe: Optional[int] = None
    ef: Optional[int] = None
    recall_k: int = RECALL_K
    recall_sample: int = RECALL_SAMPLE

    def params(self, backend: str) -> AnnParams:
        """The build parameters of a new structure of ``backend``."""
        build = ("nlist", "train_per_list", "kmeans_iters", "pq_m", "hnsw_m", "ef_construction")
        return AnnParams(
            backend,
            **{name: getattr(self, name) for name in build},
            nprobe=AnnParams.nprobe if self.nprobe is None else self.nprobe,
            ef=AnnParams.ef if self.ef is None else self.ef,
        )


def update_ann(index: RetrievalIndex, folder: str | Path, request: AnnRequest, append: bool) -> str:
    """Build, grow or drop the approximate structure of ``index`` (to be saved in ``folder``)
    as ``request`` asks (module docstring); returns a line for the user ('' when there is
    nothing to say). Call it before saving: a failed build saves nothing."""
    backend = request.backend
    if not append:
        if backend is None or backend == EXACT:
            index.build_approximate(EXACT)
            return ""
        built = index.build_approximate(
            request.params(backend),
            recall_k=request.recall_k,
            recall_sample=request.recall_sample,
        )
    else:
        existing = index.approximate
        if existing is None:
            if backend not in (None, EXACT):
                raise ConfigError(
                    "--backend",
                    f"{folder} has no approximate index to append to; "
                    f"rebuild with --overwrite --backend {backend}",
                )
            return ""
        if backend not in (None, existing.params.backend):
            raise ConfigError(
                "--backend",
                f"{folder} holds a {existing.params.backend} index; "
                f"--append cannot change it to {backend}",
            )
        index.tune_approximate(nprobe=request.nprobe, ef=request.ef)
        built = index.update_approximate(request.recall_k, request.recall_sample)
    return "" if built is None else built.describe()


def search_approximate(
    index: RetrievalIndex,
    folder: str | Path,
    queries: torch.Tensor,
    k: int,
    query_paths: Sequence[str],
    *,
    exact: bool = False,
    nprobe: Optional[int] = None,
    ef: Optional[int] = None,
) -> Optional[tuple[RetrievalResults, str]]:
    """``(results, line describing the structure and its measured recall)`` of the index's
    approximate structure with ``nprobe`` / ``ef``, or None when it has none or ``exact``
    is asked (the caller searches the exact vectors). A knob without a structure is an error."""
    if exact:
        return None
    if index.approximate is None:
        if nprobe is not None or ef is not None:
            raise ConfigError(
                "--nprobe" if nprobe is not None else "--ef",
                f"{folder} has no approximate index (build one with gspdml index --backend)",
            )
        return None
    index.tune_approximate(nprobe=nprobe, ef=ef)
    return index.search(queries, k, query_paths=query_paths), index.approximate.describe()
