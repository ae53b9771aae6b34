"""Retrieval post-processing, each step scored by the exact kNN engine.

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

The result is a :class:`~gspdml.evaluation.results.RetrievalResults` whose distances are those
the final ranking used (squared Euclidean, or d* after k-reciprocal re-ranking).

Each step is a :class:`PostProcessor` object (:class:`PCAWhitening`,
:class:`DatabaseAugmentation`, :class:`QueryExpansion`, :class:`KReciprocalReranking`) with
``fit`` (learn from the training embeddings or the database) and ``apply``;
:func:`build_steps` makes them from the spec list of ``evaluation.postprocess`` or
``gspdml search --postprocess`` (:func:`parse_steps`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.evaluation.exact_knn import knn
from gspdml.evaluation.k_reciprocal import k_reciprocal_rerank
from gspdml.evaluation.metric_registry import bounded_query_metrics, default_query_metrics
from gspdml.evaluation.metrics import flatten_metrics, metrics_from_results, search_depth
from gspdml.evaluation.results import RetrievalResults, encode_labels, relevant_counts

#: step name -> its options and their defaults (the order is the order of application)
STEPS: dict[str, dict[str, Any]] = {
    "pca_whiten": {"dim": None},
    "dba": {"k": 2, "alpha": 3.0},
    "qe": {"k": 2, "alpha": 3.0},
    "k_reciprocal": {"k1": 20, "k2": 6, "lambda": 0.3, "shortlist": 100},
}
_BLOCK = 4096


def parse_steps(
    steps: Sequence[Any], field: str = "evaluation.postprocess"
) -> list[dict[str, Any]]:
    """Validated steps with their defaults filled in, in the order of application.

    Each step is a name (``"qe"``) or a mapping ``{"name": "qe", "k": 3, "alpha": 3}``; the
    command-line form ``"qe:k=3,alpha=3"`` is accepted too.
    """
    if not isinstance(steps, (list, tuple)):
        raise ConfigError(field, f"expected a list of steps ({', '.join(STEPS)}), got {steps!r}")
    parsed = {}
    for step in steps:
        spec = _step_mapping(step, field)
        name = spec.pop("name", None)
        if name not in STEPS:
            raise ConfigError(
                field, f"unknown post-processing step {name!r}; allowed: {', '.join(STEPS)}"
            )
        if name in parsed:
            raise ConfigError(field, f"step {name!r} given twice")
        unknown = set(spec) - set(STEPS[name])
        if unknown:
            raise ConfigError(
                f"{field}.{name}",
                f"unknown option(s) {sorted(unknown)}; allowed: {sorted(STEPS[name])}",
            )
        options = {**STEPS[name], **spec}
        _check_options(name, options, f"{field}.{name}")
        parsed[name] = {"name": name, **options}
    return [parsed[name] for name in STEPS if name in parsed]


def _step_mapping(step, field) -> dict:
    if isinstance(step, Mapping):
        return dict(step)
    if not isinstance(step, str):
        raise ConfigError(field, f"a step is a name or a mapping, got {step!r}")
    name, _, rest = step.partition(":")
    spec = {"name": name.strip()}
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


def _check_options(name, options, field) -> None:
    for key, value in options.items():
        if key == "dim" and value is None:
            continue
        integer = key in ("dim", "k", "k1", "k2", "shortlist")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (integer and not isinstance(value, int))
        ):
            raise ConfigError(
                f"{field}.{key}",
                f"expected {'an integer' if integer else 'a number'}, got {value!r}",
            )
        low = 0.0 if key in ("alpha", "lambda") else 1
        if value < low or (key == "lambda" and value > 1):
            raise ConfigError(
                f"{field}.{key}",
                f"must be {'in [0, 1]' if key == 'lambda' else f'>= {low}'}, got {value}",
            )


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


# --- the steps as objects: fit, then apply ---------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """What a post-processing step reads and returns: unit ``query`` and ``database`` embeddings
    (the same tensor in leave-one-out retrieval), the training embeddings a step may learn on,
    and, after the search, each query's ``neighbours`` ``(distances [N_q, k], database rows)``."""

    query: torch.Tensor
    database: torch.Tensor
    leave_one_out: bool
    train: Optional[torch.Tensor] = None
    neighbours: Optional[tuple[torch.Tensor, torch.Tensor]] = None


class PostProcessor(ABC):
    """One step: :meth:`fit` learns what the step needs from the training embeddings or the
    database and returns the fitted step; :meth:`apply` returns the next :class:`Stage`.
    ``shortlist > 0`` marks a re-ranking step, applied to that many neighbours of the search;
    the others change the embeddings before it."""

    name: ClassVar[str]
    learns_on_training: ClassVar[bool] = False
    shortlist: int = 0

    def fit(
        self, *, train: Optional[torch.Tensor] = None, database: Optional[torch.Tensor] = None
    ) -> "PostProcessor":
        """The step fitted to ``train`` (training embeddings) or ``database``; as it is when it
        learns nothing."""
        return self

    @abstractmethod
    def apply(self, stage: Stage) -> Stage:
        """The stage after this step."""


@dataclass(frozen=True)
class PCAWhitening(PostProcessor):
    """x -> normalise(P (x - mean)) with ``dim`` components, learned by :meth:`fit` on the
    training embeddings (module docstring, step 1)."""

    name: ClassVar[str] = "pca_whiten"
    learns_on_training: ClassVar[bool] = True
    dim: Optional[int] = STEPS["pca_whiten"]["dim"]
    mean: Optional[torch.Tensor] = None
    projection: Optional[torch.Tensor] = None  # P [d, D]

    def fit(self, *, train=None, database=None) -> "PCAWhitening":
        if train is None:
            raise ConfigError(
                "pca_whiten", "needs the training embeddings to learn the whitening on"
            )
        x = torch.as_tensor(train).double()
        if x.ndim != 2 or len(x) < 2:
            raise ConfigError(
                "pca_whiten", f"needs training embeddings [n >= 2, D], got shape {tuple(x.shape)}"
            )
        dim = x.shape[1] if self.dim is None else int(self.dim)
        if not 1 <= dim <= x.shape[1]:
            raise ConfigError(
                "pca_whiten.dim",
                f"must be between 1 and the embedding dimension {x.shape[1]}, got {dim}",
            )
        mean = x.mean(0)
        centred = x - mean
        eigenvalues, eigenvectors = torch.linalg.eigh(centred.T @ centred / len(x))
        eigenvalues, eigenvectors = eigenvalues.flip(0)[:dim], eigenvectors.flip(1)[:, :dim]
        scale = (eigenvalues.clamp(min=0) + 1e-6 * eigenvalues[0].clamp(min=1e-12)).rsqrt()
        return replace(self, mean=mean, projection=scale[:, None] * eigenvectors.T)

    def __call__(self, x) -> torch.Tensor:
        if self.projection is None:
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

    def apply(self, stage: Stage) -> Stage:
        query = self(stage.query)
        database = query if stage.leave_one_out else self(stage.database)
        return replace(stage, query=query, database=database)


@dataclass(frozen=True)
class DatabaseAugmentation(PostProcessor):
    """alpha-DBA: every database vector expanded by its ``k`` nearest others (module docstring,
    step 2); in leave-one-out retrieval the queries are the augmented database."""

    name: ClassVar[str] = "dba"
    k: int = STEPS["dba"]["k"]
    alpha: float = STEPS["dba"]["alpha"]

    def apply(self, stage: Stage) -> Stage:
        database = alpha_expand(
            stage.database, stage.database, self.k, self.alpha, leave_one_out=True
        )
        query = database if stage.leave_one_out else stage.query
        return replace(stage, database=database, query=query)


@dataclass(frozen=True)
class QueryExpansion(PostProcessor):
    """alpha-QE: every query expanded by its ``k`` nearest database vectors (module docstring,
    step 3)."""

    name: ClassVar[str] = "qe"
    k: int = STEPS["qe"]["k"]
    alpha: float = STEPS["qe"]["alpha"]

    def apply(self, stage: Stage) -> Stage:
        query = alpha_expand(
            stage.query, stage.database, self.k, self.alpha, leave_one_out=stage.leave_one_out
        )
        return replace(stage, query=query)


@dataclass(frozen=True)
class KReciprocalReranking(PostProcessor):
    """The ``shortlist`` nearest database items of each query re-ranked by d*
    (:mod:`gspdml.evaluation.k_reciprocal`; module docstring, step 4)."""

    name: ClassVar[str] = "k_reciprocal"
    k1: int = STEPS["k_reciprocal"]["k1"]
    k2: int = STEPS["k_reciprocal"]["k2"]
    lam: float = STEPS["k_reciprocal"]["lambda"]
    shortlist: int = STEPS["k_reciprocal"]["shortlist"]

    def apply(self, stage: Stage) -> Stage:
        if stage.neighbours is None:
            raise ConfigError(
                "k_reciprocal", "re-ranks the neighbours of a search; the stage has none"
            )
        _, candidates = stage.neighbours
        neighbours = k_reciprocal_rerank(
            stage.query, stage.database, candidates, self.k1, self.k2, self.lam, stage.leave_one_out
        )
        return replace(stage, neighbours=neighbours)


_CLASSES = {
    cls.name: cls
    for cls in (PCAWhitening, DatabaseAugmentation, QueryExpansion, KReciprocalReranking)
}


def build_steps(
    steps: Sequence[Any], field: str = "evaluation.postprocess"
) -> tuple[PostProcessor, ...]:
    """The step objects of a spec list (:func:`parse_steps`; objects pass through), in the order
    of application."""
    if not isinstance(steps, (list, tuple)):
        raise ConfigError(field, f"expected a list of steps ({', '.join(STEPS)}), got {steps!r}")
    objects = [s for s in steps if isinstance(s, PostProcessor)]
    specs = parse_steps([s for s in steps if not isinstance(s, PostProcessor)], field)
    for spec in specs:
        options = {
            ("lam" if key == "lambda" else key): value
            for key, value in spec.items()
            if key != "name"
        }
        objects.append(_CLASSES[spec["name"]](**options))
    names = [step.name for step in objects]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(field, f"step(s) {twice} given twice")
    return tuple(sorted(objects, key=lambda step: list(STEPS).index(step.name)))


def needs_training_embeddings(steps: Sequence[Any]) -> bool:
    """Whether a step learns on the training embeddings (PCA-whitening)."""
    return any(step.learns_on_training for step in build_steps(steps))


# --- the pipeline ------------------------------------------------------------------------------------


def postprocessed_retrieve(
    query,
    query_labels,
    reference=None,
    reference_labels=None,
    *,
    steps: Sequence[Any] = (),
    train=None,
    min_k: int = 1,
) -> RetrievalResults:
    """Exact retrieval (leave-one-out when ``reference`` is None) after the post-processing
    ``steps`` (step objects or their specs, :func:`build_steps`); ``train`` are the training
    embeddings that PCA-whitening learns on. Each step is fitted on the stage it applies to. k
    is chosen as in :func:`gspdml.evaluation.exact_knn.retrieve` (max R_i, at least ``min_k``),
    at least the shortlist of a re-ranking step."""
    steps = build_steps(steps)
    loo = reference is None
    values, q_codes, r_codes = encode_labels(query_labels, None if loo else reference_labels)
    excluded = torch.arange(len(q_codes)) if loo else None
    q = F.normalize(torch.as_tensor(query).float(), dim=1)
    r = q if loo else F.normalize(torch.as_tensor(reference).float(), dim=1)
    if len(q) != len(q_codes) or len(r) != len(r_codes):
        raise ConfigError(
            "labels",
            f"{len(q_codes)} query and {len(r_codes)} reference labels for {len(q)} and {len(r)} embeddings",
        )
    stage = Stage(q, r, loo, None if train is None else torch.as_tensor(train))
    for step in (s for s in steps if not s.shortlist):
        stage = step.fit(train=stage.train, database=stage.database).apply(stage)
    n_ref = len(stage.database) - int(loo)
    r_max = (
        int(relevant_counts(q_codes, r_codes, len(values), excluded).max()) if len(q_codes) else 0
    )
    k = min(max(r_max, int(min_k), 1, *(s.shortlist for s in steps)), n_ref)
    stage = replace(stage, neighbours=_nearest(stage.query, stage.database, loo, k))
    for step in (s for s in steps if s.shortlist):
        stage = step.fit(train=stage.train, database=stage.database).apply(stage)
    distances, indices = stage.neighbours
    return RetrievalResults(indices, distances, q_codes, r_codes, values, excluded=excluded)


def _nearest(q, r, loo, k):
    """Exact k nearest rows of r for each row of q; in leave-one-out retrieval row i of r is not
    a neighbour of query i (q is r, or q was expanded from r)."""
    if not loo or q is r:
        return knn(q, None if loo else r, k)
    distances, rows = knn(q, r, k + 1)
    keep = rows != torch.arange(len(q))[:, None]
    keep[keep.all(1), -1] = False
    return distances[keep].view(len(q), k), rows[keep].view(len(q), k)


def postprocessed_metrics(
    query,
    query_labels,
    gallery=None,
    gallery_labels=None,
    *,
    steps: Sequence[Any] = (),
    train=None,
    recall_at: Sequence[int] = (1, 2, 4, 8),
    metrics: Optional[Sequence[str]] = None,
) -> dict[str, float]:
    """Flat retrieval metrics (:func:`gspdml.evaluation.metrics.flatten_metrics`) of embeddings
    after the post-processing ``steps``: leave-one-out when ``gallery`` is None, else query ->
    gallery; ``train``: the training embeddings PCA-whitening learns on (None when no step
    needs them, :func:`needs_training_embeddings`); ``metrics``: the per-query metrics (default
    the default ones; any of bounded depth: a re-ranking step orders a shortlist, not the whole
    ranking that mAP and MRR read). The post-processed half of every report of
    :mod:`gspdml.evaluation.service`."""
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
