"""Retrieval post-processing: registered steps that work on a search, scored by the exact kNN engine.

Steps (applied in this order, each optional; every one works on L2-normalised embeddings and
searches with :func:`gspdml.evaluation.exact_knn.knn`, so no N x N matrix is ever held):

1. **PCA-whitening** learned on training embeddings X (Jégou & Chum, "Negative evidences and
   co-occurrences in image retrieval: the benefit of PCA and whitening", ECCV 2012, §2):
   with mu the mean of X and (1/n) sum (x - mu)(x - mu)^T = U diag(lambda) U^T,

       x_hat = P (x - mu) / ||P (x - mu)||,   P = diag(lambda_1..d + eps)^(-1/2) U_d^T

   (d leading components; eps = 1e-6 lambda_1 keeps near-empty directions finite).
2. **alpha-DBA**, database-side augmentation (Radenović, Tolias & Chum, "Fine-tuning CNN image
   retrieval with no human annotation", TPAMI 2018, §5.3 "alpha-weighted query expansion",
   applied to every database vector): with N_k(x) the k nearest database vectors other than x,

       x' = normalise( x + sum_{y in N_k(x)} max(x.y, 0)^alpha y ).

3. **alpha-QE**, query expansion (same paper and equation) against the (augmented) database:
   q' = normalise( q + sum_{y in N_k(q)} max(q.y, 0)^alpha y ); in leave-one-out retrieval the
   query's own database row is not one of its N_k(q).
4. **k-reciprocal re-ranking** (Zhong, Zheng, Cao & Li, "Re-ranking person re-identification with
   k-reciprocal encoding", CVPR 2017, §3, eq. 4-12; the equations are in
   :mod:`gspdml.evaluation.k_reciprocal`): the Jaccard distance of the items' k-reciprocal
   encodings, mixed with the squared Euclidean distance, d* = (1 - lambda) d_J + lambda d
   (eq. 12), re-ranks each query's ``shortlist`` nearest database items (bounded memory: the
   encodings are sparse, ~k1 entries a row); the other items keep their order after them.

Each step is a :class:`PostProcessor` registered in :data:`POSTPROCESSORS`, built from the
specs of ``evaluation.postprocess`` by :func:`build_steps`; :func:`postprocessed_search` runs the
steps around an exact search, for the evaluation (:func:`postprocessed_retrieve`) and for
:meth:`gspdml.retrieval.index.RetrievalIndex.search` alike. Distances are those the final
ranking used: squared Euclidean, or d* after k-reciprocal re-ranking.
"""

from __future__ import annotations

import dataclasses
import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Optional, TypeVar

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.evaluation.exact_knn import knn
from gspdml.evaluation.k_reciprocal import k_reciprocal_rerank
from gspdml.evaluation.metric_registry import bounded_query_metrics, default_query_metrics
from gspdml.evaluation.metrics import flatten_metrics, metrics_from_results, search_depth
from gspdml.evaluation.results import (
    RetrievalResults,
    drop_excluded,
    encode_labels,
    relevant_counts,
)
from gspdml.registry import Registry, parse_spec
from gspdml.settings.sections import RECALL_AT
from gspdml.typecheck import first_mismatch

#: post-processing step name -> class (:class:`PostProcessor`)
POSTPROCESSORS = Registry("post-processing step")
_BLOCK = 4096


# --- what a step reads and returns ------------------------------------------------------------


@dataclass(frozen=True)
class SearchResult:
    """Unit ``query`` and ``reference`` embeddings (the same tensor in leave-one-out retrieval,
    where query i is reference row i and never its own neighbour) and, once searched, each
    query's neighbour list: ``distances`` and reference rows ``indices``, both ``[N_q, k]``."""

    query: torch.Tensor
    reference: torch.Tensor
    leave_one_out: bool = False
    distances: Optional[torch.Tensor] = None
    indices: Optional[torch.Tensor] = None

    @property
    def neighbours(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(distances, indices)`` of the search; an error before it."""
        if self.distances is None or self.indices is None:
            raise ConfigError("postprocess", "a re-ranking step needs the neighbours of a search")
        return self.distances, self.indices

    def searched(self, k: int) -> SearchResult:
        """The exact ``k`` nearest reference rows of each query (squared Euclidean), row i never
        one of query i's in leave-one-out retrieval."""
        q, r = self.query, self.reference
        if not self.leave_one_out or q is r:
            distances, indices = knn(q, None if self.leave_one_out else r, k)
        else:
            distances, indices = knn(q, r, k + 1)
            indices, distances = drop_excluded(torch.arange(len(q)), indices, distances)
        return replace(self, distances=distances, indices=indices)


class PostProcessor(ABC):
    """One step, a frozen dataclass whose fields are its options (documented in its docstring).
    :meth:`fit` learns on the training embeddings; :meth:`apply` returns the next
    :class:`SearchResult`. ``shortlist > 0`` marks a re-ranking step, applied to that many
    neighbours of the search; the others change the embeddings before it."""

    name: ClassVar[str]
    #: the step's place in the order of application (module docstring)
    position: ClassVar[int]
    learns_on_training: ClassVar[bool] = False
    #: field -> config key, for an option whose config name is a Python keyword
    config_names: ClassVar[Mapping[str, str]] = {}
    shortlist: int = 0

    def fit(self, *, train: Optional[torch.Tensor] = None) -> PostProcessor:
        """The step fitted to the training embeddings ``train``; as it is when it learns nothing."""
        return self

    @abstractmethod
    def apply(self, result: SearchResult) -> SearchResult:
        """The search result after this step."""

    def require(self, ok: bool, option: str, message: str) -> None:
        """Raise a :class:`ConfigError` naming ``<step>.<option>`` (its config name) unless ``ok``."""
        if not ok:
            raise ConfigError(f"{self.name}.{self.config_names.get(option, option)}", message)

    def spec(self) -> dict[str, Any]:
        """``{"name": ..., **options}``, every option by its config name."""
        options = {
            self.config_names.get(f.name, f.name): getattr(self, f.name)
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if f.init
        }
        return {"name": self.name, **options}


_Step = TypeVar("_Step", bound=type[PostProcessor])


def _register(cls: _Step) -> _Step:
    POSTPROCESSORS.register(cls.name)(cls)
    return cls


# --- 2-3. alpha-weighted expansion --------------------------------------------------------------


def alpha_expand(
    x: torch.Tensor, database: torch.Tensor, k: int, alpha: float, leave_one_out: bool
) -> torch.Tensor:
    """normalise(x + sum_{y in N_k(x)} max(x.y, 0)^alpha y) for unit rows x against the unit
    ``database`` (module docstring, steps 2-3); ``leave_one_out``: x is the database and row i
    is not its own neighbour."""
    _, rows = knn(x, None if leave_one_out else database, k)
    out = torch.empty_like(x)
    for s in range(0, len(x), _BLOCK):
        xs, neighbours = x[s : s + _BLOCK], database[rows[s : s + _BLOCK]]
        weights = torch.einsum("nd,nkd->nk", xs, neighbours).clamp(min=0).pow(alpha)
        out[s : s + _BLOCK] = F.normalize(
            xs + torch.einsum("nk,nkd->nd", weights, neighbours), dim=1
        )
    return out


# --- the registered steps -----------------------------------------------------------------------


@_register
@dataclass(frozen=True)
class PCAWhitening(PostProcessor):
    """PCA-whitening: x -> normalise(P (x - mean)), learned by :meth:`fit` on the training
    embeddings (module docstring, step 1; Jégou & Chum, ECCV 2012, §2).

    Args:
        dim: the leading components d kept (null: all, the embedding dimension).
    """

    name: ClassVar[str] = "pca_whiten"
    position: ClassVar[int] = 1
    learns_on_training: ClassVar[bool] = True
    dim: Optional[int] = None
    mean: Optional[torch.Tensor] = dataclasses.field(default=None, init=False, compare=False)
    projection: Optional[torch.Tensor] = dataclasses.field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        self.require(self.dim is None or self.dim >= 1, "dim", f"must be >= 1, got {self.dim}")

    def fit(self, *, train: Optional[torch.Tensor] = None) -> PCAWhitening:
        if train is None:
            raise ConfigError(
                "pca_whiten", "needs the training embeddings to learn the whitening on"
            )
        x = torch.as_tensor(train).double()
        if x.ndim != 2 or len(x) < 2:
            raise ConfigError(
                "pca_whiten", f"needs training embeddings [n >= 2, D], got shape {tuple(x.shape)}"
            )
        dim = x.shape[1] if self.dim is None else self.dim
        self.require(
            dim <= x.shape[1], "dim", f"must be <= the embedding dimension {x.shape[1]}, got {dim}"
        )
        mean = x.mean(0)
        centred = x - mean
        eigenvalues, eigenvectors = torch.linalg.eigh(centred.T @ centred / len(x))
        eigenvalues, eigenvectors = eigenvalues.flip(0)[:dim], eigenvectors.flip(1)[:, :dim]
        scale = (eigenvalues.clamp(min=0) + 1e-6 * eigenvalues[0].clamp(min=1e-12)).rsqrt()
        fitted = replace(self)  # mean [D] and projection P [d, D], the fields fit sets
        object.__setattr__(fitted, "mean", mean)
        object.__setattr__(fitted, "projection", scale[:, None] * eigenvectors.T)
        return fitted

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.mean is None or self.projection is None:
            raise ConfigError(
                "pca_whiten", "apply a fitted whitening (PCAWhitening(dim).fit(train=embeddings))"
            )
        out = [
            F.normalize(
                (torch.as_tensor(x[i : i + 65536]).double() - self.mean) @ self.projection.T, dim=1
            )
            for i in range(0, len(x), 65536)
        ]
        return torch.cat(out).float()

    def apply(self, result: SearchResult) -> SearchResult:
        query = self(result.query)
        reference = query if result.leave_one_out else self(result.reference)
        return replace(result, query=query, reference=reference)


@dataclass(frozen=True)
class _AlphaExpansion(PostProcessor):
    """The options and their checks of alpha-weighted expansion (module docstring, steps 2-3)."""

    k: int = 2
    alpha: float = 3.0

    def __post_init__(self) -> None:
        self.require(self.k >= 1, "k", f"must be >= 1, got {self.k}")
        self.require(self.alpha >= 0, "alpha", f"must be >= 0.0, got {self.alpha}")


@_register
@dataclass(frozen=True)
class DatabaseAugmentation(_AlphaExpansion):
    """alpha-DBA: every database vector expanded by its ``k`` nearest others (module docstring,
    step 2; Radenović et al., TPAMI 2018, §5.3); in leave-one-out retrieval the queries are the
    augmented database.

    Args:
        k: the nearest other database vectors each one is expanded by (>= 1).
        alpha: the exponent of the weights max(x.y, 0)^alpha (>= 0; 0: equal weights).
    """

    name: ClassVar[str] = "dba"
    position: ClassVar[int] = 2

    def apply(self, result: SearchResult) -> SearchResult:
        reference = alpha_expand(
            result.reference, result.reference, self.k, self.alpha, leave_one_out=True
        )
        query = reference if result.leave_one_out else result.query
        return replace(result, reference=reference, query=query)


@_register
@dataclass(frozen=True)
class QueryExpansion(_AlphaExpansion):
    """alpha-QE: every query expanded by its ``k`` nearest database vectors (module docstring,
    step 3; Radenović et al., TPAMI 2018, §5.3).

    Args:
        k: the nearest database vectors each query is expanded by (>= 1).
        alpha: the exponent of the weights max(q.y, 0)^alpha (>= 0; 0: equal weights).
    """

    name: ClassVar[str] = "qe"
    position: ClassVar[int] = 3

    def apply(self, result: SearchResult) -> SearchResult:
        query = alpha_expand(
            result.query, result.reference, self.k, self.alpha, result.leave_one_out
        )
        return replace(result, query=query)


@_register
@dataclass(frozen=True)
class KReciprocalReranking(PostProcessor):
    """k-reciprocal re-ranking: the ``shortlist`` nearest database items of each query re-ranked
    by d* (module docstring, step 4; Zhong et al., CVPR 2017, §3, eq. 4-12,
    :mod:`gspdml.evaluation.k_reciprocal`).

    Args:
        k1: the k of the k-reciprocal sets R*(p, k1) (eq. 6-7; >= 1).
        k2: the neighbours averaged by local query expansion (eq. 9; >= 1, 1: none).
        lambda: the weight of the original distance in d* (eq. 12; in [0, 1]); the field
            ``lam`` in Python.
        shortlist: the nearest database items of each query that are re-ranked (>= 1).
    """

    name: ClassVar[str] = "k_reciprocal"
    position: ClassVar[int] = 4
    config_names: ClassVar[Mapping[str, str]] = {"lam": "lambda"}
    k1: int = 20
    k2: int = 6
    lam: float = 0.3
    shortlist: int = 100

    def __post_init__(self) -> None:
        for option in ("k1", "k2", "shortlist"):
            value = getattr(self, option)
            self.require(value >= 1, option, f"must be >= 1, got {value}")
        self.require(0 <= self.lam <= 1, "lam", f"must be in [0, 1], got {self.lam}")

    def apply(self, result: SearchResult) -> SearchResult:
        _, candidates = result.neighbours
        options = self.k1, self.k2, self.lam, result.leave_one_out
        distances, indices = k_reciprocal_rerank(
            result.query, result.reference, candidates, *options
        )
        return replace(result, distances=distances, indices=indices)


# --- building the steps from their specs -------------------------------------------------------


def build_steps(
    steps: Sequence[Any], field: str = "evaluation.postprocess"
) -> tuple[PostProcessor, ...]:
    """The step objects of a list of steps, in the order of application: objects pass through, a
    spec is a name (``"qe"``), a mapping (``{"name": "qe", "k": 3}`` or ``{"qe": {"k": 3}}``) or
    ``"qe:k=3,alpha=3"``, its options checked against the step's fields."""
    if not isinstance(steps, (list, tuple)):
        allowed = ", ".join(POSTPROCESSORS.names())
        raise ConfigError(field, f"expected a list of steps ({allowed}), got {steps!r}")
    objects = [s if isinstance(s, PostProcessor) else _build_step(s, field) for s in steps]
    names = [step.name for step in objects]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(field, f"step(s) {twice} given twice")
    return tuple(sorted(objects, key=lambda step: step.position))


def parse_steps(
    steps: Sequence[Any], field: str = "evaluation.postprocess"
) -> list[dict[str, Any]]:
    """The specs of :func:`build_steps` (validated, defaults filled in, in the order of
    application), as ``{"name": ..., **options}``."""
    return [step.spec() for step in build_steps(steps, field)]


def _build_step(step: Any, field: str) -> PostProcessor:
    name, options = parse_spec(
        _command_line_spec(step, field) if isinstance(step, str) else step, field
    )
    factory = POSTPROCESSORS.get(name, field)
    where = f"{field}.{name}"
    names: Mapping[str, str] = getattr(factory, "config_names", {})
    renamed = {key: param for param, key in names.items()}
    allowed = sorted(names.get(p, p) for p in inspect.signature(factory).parameters)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(where, f"unknown option(s) {unknown}; allowed: {allowed}")
    kwargs = {renamed.get(key, key): value for key, value in options.items()}
    mismatch = first_mismatch(factory, kwargs)
    if mismatch:
        param, expected = mismatch
        raise ConfigError(
            f"{where}.{names.get(param, param)}", f"expected {expected}, got {kwargs[param]!r}"
        )
    try:
        processor: PostProcessor = factory(**kwargs)
        return processor
    except ConfigError as error:
        raise ConfigError(f"{field}.{error.field}", str(error).split(": ", 1)[-1]) from None


def _command_line_spec(step: str, field: str) -> dict[str, Any]:
    """``{"name": ..., **options}`` of ``NAME[:key=value,...]`` (numbers; ``none`` for null)."""
    name, _, rest = step.partition(":")
    spec: dict[str, Any] = {"name": name.strip()}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(field, f"{step!r}: expected key=value, got {item!r}")
        try:
            spec[key.strip()] = (
                None if value.strip() == "none" else float(value) if "." in value else int(value)
            )
        except ValueError:
            raise ConfigError(
                field, f"{step!r}: {key.strip()} must be a number, got {value!r}"
            ) from None
    return spec


# --- the pipeline -------------------------------------------------------------------------------


def postprocessed_search(
    query: Any,
    reference: Any = None,
    *,
    k: int,
    steps: Sequence[Any] = (),
    train: Any = None,
) -> SearchResult:
    """The exact search of ``query`` in ``reference`` (leave-one-out when None), L2-normalised,
    after the ``steps`` (:func:`build_steps`), each fitted on ``train``; ``k`` deep, at least a
    re-ranking step's shortlist, at most the searchable references."""
    built = build_steps(steps)
    loo = reference is None
    q = F.normalize(torch.as_tensor(query).float(), dim=1)
    r = q if loo else F.normalize(torch.as_tensor(reference).float(), dim=1)
    train = None if train is None else torch.as_tensor(train)
    result = SearchResult(q, r, loo)
    for step in (s for s in built if not s.shortlist):
        result = step.fit(train=train).apply(result)
    depth = min(max(k, 1, *(s.shortlist for s in built)), len(r) - int(loo))
    result = result.searched(depth)
    for step in (s for s in built if s.shortlist):
        result = step.fit(train=train).apply(result)
    return result


def postprocessed_retrieve(
    query: Any,
    query_labels: Any,
    reference: Any = None,
    reference_labels: Any = None,
    *,
    steps: Sequence[Any] = (),
    train: Any = None,
    min_k: int = 1,
) -> RetrievalResults:
    """Exact retrieval after the post-processing ``steps`` (:func:`postprocessed_search`), k
    chosen as in :func:`gspdml.evaluation.exact_knn.retrieve` (max R_i, at least ``min_k``)."""
    loo = reference is None
    values, q_codes, r_codes = encode_labels(query_labels, None if loo else reference_labels)
    excluded = torch.arange(len(q_codes)) if loo else None
    n_query, n_reference = len(query), len(query if loo else reference)
    if n_query != len(q_codes) or n_reference != len(r_codes):
        raise ConfigError(
            "labels",
            f"{len(q_codes)} query and {len(r_codes)} reference labels for {n_query} and "
            f"{n_reference} embeddings",
        )
    r_max = relevant_counts(q_codes, r_codes, len(values), excluded).max() if len(q_codes) else 0
    found = postprocessed_search(
        query, reference, k=max(int(r_max), int(min_k)), steps=steps, train=train
    )
    distances, indices = found.neighbours
    return RetrievalResults(indices, distances, q_codes, r_codes, values, excluded=excluded)


def postprocessed_metrics(
    query: Any,
    query_labels: Any,
    gallery: Any = None,
    gallery_labels: Any = None,
    *,
    steps: Sequence[Any] = (),
    train: Any = None,
    recall_at: Sequence[int] = RECALL_AT,
    metrics: Optional[Sequence[str]] = None,
) -> dict[str, float]:
    """Flat retrieval metrics of embeddings after the post-processing ``steps`` (leave-one-out
    when ``gallery`` is None; ``train``: what PCA-whitening learns on); ``metrics``: per-query
    metrics of bounded depth only (a re-ranking step orders a shortlist, not the whole ranking).
    The post-processed half of every report of :mod:`gspdml.evaluation.service`."""
    bounded = bounded_query_metrics()
    metrics = default_query_metrics() if metrics is None else tuple(metrics)
    whole = [name for name in metrics if name not in bounded]
    if whole:
        raise ConfigError(
            "metrics",
            f"{whole} read the whole ranking and are not computed after post-processing; "
            f"allowed: {', '.join(bounded)}",
        )
    results = postprocessed_retrieve(
        query,
        query_labels,
        gallery,
        gallery_labels,
        steps=steps,
        train=train,
        min_k=search_depth(metrics, recall_at),
    )
    return flatten_metrics(metrics_from_results(results, recall_at=recall_at, metrics=metrics))
