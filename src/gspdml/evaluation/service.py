"""The one evaluation service: what the trainer (its rounds and its test split), ``gspdml
evaluate`` and the protocols score a model or its embeddings with.

An :class:`EvalSpec` says what to compute (the per-query metrics, the K of Recall@K, the
selection metric and the metrics it needs, the post-processing steps); an :class:`EvalReport` is
its answer in the flat schema of ``results.json`` and ``metrics.jsonl``:

- the per-query metrics, leave-one-out when the split has no gallery, else query -> gallery
  (default :func:`~gspdml.evaluation.metric_registry.default_query_metrics`; the whole-ranking
  mAP and MRR, :mod:`gspdml.evaluation.whole_ranking`, and the metrics at a cutoff only when
  named; :meth:`EvalSpec.metrics_computed` says which were);
- ``nmi`` and ``ami`` when a requested metric needs k-means; the derived metrics requested;
- the counts ``num_queries``, ``num_lone_queries`` and ``k``;
- with post-processing steps, the bounded per-query metrics and the counts again after them,
  under :data:`POSTPROCESSED_PREFIX` (``postprocessed_map_at_r``, ...).

:func:`evaluate` embeds a split at the run's device and precision, resolved once (a
:class:`~gspdml.compat.hardware.PrecisionChoice` is used as it is, a name is resolved here), with
the weights in that precision's layout (:func:`gspdml.models.inference.placed`) as the trainer
holds them, so that its evaluations get the same numbers; the search and metrics run there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from torch import nn

from gspdml.compat.hardware import Precision, resolve_precision
from gspdml.data.base import EvalSplit, LabelledDataset
from gspdml.errors import ConfigError
from gspdml.evaluation.metric_registry import (
    METRICS,
    bounded_query_metrics,
    check_metric_names,
    default_query_metrics,
    metrics_of_kind,
    with_inputs,
)
from gspdml.evaluation.metrics import (
    check_recall_at,
    flatten_metrics,
    metrics_from_results,
    per_query_scores,
    retrieval_metrics,
    search_for_metrics,
    whole_ranking_metrics,
)
from gspdml.evaluation.postprocess import PostProcessor, build_steps, postprocessed_metrics
from gspdml.evaluation.results import RetrievalResults
from gspdml.evaluation.selection import (
    POSTPROCESSED_PREFIX,
    check_selection_metric,
    selection_value,
)
from gspdml.models.inference import embed, placed, resolve_device, split_embeddings
from gspdml.settings.sections import RECALL_AT, EvaluationConfig

#: embeddings or labels as the search takes them: a tensor, a numpy array, a sequence
Array = Any


@dataclass(frozen=True)
class EvalSpec:
    """What an evaluation computes (module docstring).

    Attributes:
        metrics: registered metric names to report (None: the default per-query metrics);
            naming a clustering or derived metric adds it; the selection metric is added.
        recall_at: the K of ``recall_at_<K>``.
        selection: the metric a run is selected by (``evaluation.metric``).
        postprocess: post-processing steps (objects or specs,
            :func:`~gspdml.evaluation.postprocess.build_steps`).
        clustering: run k-means (report ``nmi`` and ``ami``) even if no requested metric needs it.
    """

    metrics: Optional[tuple[str, ...]] = None
    recall_at: tuple[int, ...] = RECALL_AT
    selection: str = "map_at_r"
    postprocess: tuple[PostProcessor, ...] = ()
    clustering: bool = False
    names: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_selection_metric(self.selection)
        object.__setattr__(self, "recall_at", check_recall_at(self.recall_at))
        object.__setattr__(self, "postprocess", build_steps(list(self.postprocess)))
        asked = (
            default_query_metrics() if self.metrics is None else check_metric_names(self.metrics)
        )
        object.__setattr__(self, "names", with_inputs((*asked, self.selection)))

    @classmethod
    def from_evaluation(
        cls, evaluation: EvaluationConfig, metrics: Optional[tuple[str, ...]] = None
    ) -> EvalSpec:
        """The spec of a run config's ``evaluation`` section; ``metrics``: the per-query metrics
        (None: the default ones and ``evaluation.metrics``). ``evaluation.clustering`` adds NMI
        and AMI to the full reports (``metrics=None``); a validation round names its metrics and
        clusters only for a selection metric that needs k-means."""
        if metrics is None and evaluation.metrics:
            metrics = (*default_query_metrics(), *evaluation.metrics)
        return cls(
            metrics=metrics,
            recall_at=evaluation.recall_at,
            selection=evaluation.metric,
            postprocess=build_steps(evaluation.postprocess),
            clustering=metrics is None and evaluation.clustering,
        )

    def metrics_computed(self) -> dict[str, list[str]]:
        """``{"computed": [...], "not_computed": [...]}``: the registered metrics this spec
        computes and those it leaves out; what a report says it computed."""
        computed = [
            name
            for name, metric in METRICS.items()
            if name in self.names or (metric.kind == "clustering" and self.needs_clustering)
        ]
        return {
            "computed": computed,
            "not_computed": [name for name in METRICS if name not in computed],
        }

    @property
    def needs_clustering(self) -> bool:
        return self.clustering or any(METRICS[name].needs_clustering for name in self.names)

    @property
    def needs_training_embeddings(self) -> bool:
        """Whether a post-processing step learns on the training embeddings (PCA-whitening)."""
        return any(step.learns_on_training for step in self.postprocess)


@dataclass(frozen=True)
class EvalReport:
    """The flat metrics of one evaluation (module docstring) and the metric selection reads."""

    metrics: dict[str, float]
    selection: str = "map_at_r"

    def selection_value(self, postprocessed: bool = False) -> float:
        """The number a round is selected by: the selection metric, read after post-processing
        when ``postprocessed`` (``evaluation.select_postprocessed``)."""
        return selection_value(self.metrics, self.selection, postprocessed)

    def postprocessed(self) -> dict[str, float]:
        """The post-processed metrics without their prefix."""
        n = len(POSTPROCESSED_PREFIX)
        return {
            key[n:]: value
            for key, value in self.metrics.items()
            if key.startswith(POSTPROCESSED_PREFIX)
        }


def with_postprocessed(metrics: Sequence[str], spec: EvalSpec) -> tuple[str, ...]:
    """``metrics`` (report keys), then their post-processed twins (none for the clustering
    metrics) when ``spec`` post-processes: the keys a summary over several reports aggregates."""
    clustering = metrics_of_kind("clustering")
    twinned = [m for m in metrics if m not in clustering]
    twins = tuple(POSTPROCESSED_PREFIX + m for m in twinned) if spec.postprocess else ()
    return (*metrics, *twins)


def evaluate_embeddings(
    query: Array,
    query_labels: Array,
    gallery: Optional[Array] = None,
    gallery_labels: Optional[Array] = None,
    spec: EvalSpec = EvalSpec(),
    train: Optional[Array] = None,
    precision: Precision = "auto",
) -> EvalReport:
    """The report of ``spec`` on embeddings: leave-one-out when ``gallery`` is None, else query
    -> gallery; ``train``: the training embeddings a post-processing step learns on;
    ``precision``: the run's, for the search's candidate pass (its neighbours are exact)."""
    query_metrics = [name for name in spec.names if METRICS[name].kind == "query"]
    nested = retrieval_metrics(
        query,
        query_labels,
        gallery,
        gallery_labels,
        recall_at=spec.recall_at,
        metrics=query_metrics,
        clustering=spec.needs_clustering,
        precision=precision,
    )
    metrics = flatten_metrics(nested)
    for name in spec.names:
        metric = METRICS[name]
        if metric.kind == "derived":
            metrics[name] = metric.score(metrics)
    if spec.postprocess:
        if spec.needs_training_embeddings and train is None:
            raise ConfigError(
                "train", "a post-processing step learns on the training embeddings; pass them"
            )
        after = postprocessed_metrics(
            query,
            query_labels,
            gallery,
            gallery_labels,
            steps=spec.postprocess,
            train=train,
            recall_at=spec.recall_at,
            metrics=[name for name in query_metrics if name in bounded_query_metrics()],
        )
        metrics.update({POSTPROCESSED_PREFIX + key: value for key, value in after.items()})
    return EvalReport(metrics, spec.selection)


@dataclass(frozen=True)
class QueryEvaluation:
    """The per-query side of an evaluation (:func:`evaluate_queries`).

    Attributes:
        results: the exact search (as deep as the metrics need, at least ``min_k``).
        scores: ``{key: float64 [N_q]}`` for each per-query metric, keyed as in the flat report;
            NaN for the R-normalised scores of a lone query (R_i = 0).
        per_class: ``{label: {key: mean over the class's scored queries}}``, plus
            ``num_queries`` and ``num_lone_queries`` (those not scored).
    """

    results: RetrievalResults
    scores: dict[str, torch.Tensor]
    per_class: dict[Any, dict[str, float]]

    def worst(self, count: int, key: str = "map_at_r") -> list[int]:
        """The ``count`` scored queries with the lowest ``key`` (ties: lower P@1, then the
        query's position), worst first."""
        if key not in self.scores:
            raise ConfigError("key", f"no per-query score {key!r}; have: {', '.join(self.scores)}")
        scored = (~self.results.lone_queries).nonzero().flatten().tolist()
        first = self.scores.get("precision_at_1", self.scores[key])
        scored.sort(key=lambda i: (float(self.scores[key][i]), float(first[i]), i))
        return scored[:count]


def evaluate_queries(
    query: Array,
    query_labels: Array,
    gallery: Optional[Array] = None,
    gallery_labels: Optional[Array] = None,
    spec: EvalSpec = EvalSpec(),
    min_k: int = 1,
) -> QueryEvaluation:
    """The per-query metrics of ``spec`` on embeddings, query by query and class by class: the
    same search and metrics as :func:`evaluate_embeddings`, of the plain search (a spec with
    post-processing steps is refused)."""
    if spec.postprocess:
        raise ConfigError(
            "postprocess", "per-query scores are of the plain search; give a spec without steps"
        )
    names = [name for name in spec.names if METRICS[name].kind == "query"]
    results = search_for_metrics(
        query,
        query_labels,
        gallery,
        gallery_labels,
        recall_at=spec.recall_at,
        metrics=names,
        min_k=min_k,
    )
    whole = whole_ranking_metrics(results, query, gallery, names)
    nested = metrics_from_results(
        results, recall_at=spec.recall_at, metrics=names, per_class=True, whole_ranking=whole
    )
    counts = _class_counts(results)
    per_class = {
        label: {**flatten_metrics(values), **counts[label]}
        for label, values in nested["per_class"].items()
    }
    scores = per_query_scores(results, spec.recall_at, [n for n in names if n not in whole])
    return QueryEvaluation(results, {**scores, **whole}, per_class)


def _class_counts(results: RetrievalResults) -> dict[Any, dict[str, int]]:
    """``{label: {"num_queries", "num_lone_queries"}}`` of the queries of ``results``."""
    lone = results.lone_queries
    counts: dict[Any, dict[str, int]] = {}
    for code in torch.unique(results.query_labels).tolist():
        of_class = results.query_labels == code
        counts[results.label(code)] = {
            "num_queries": int(of_class.sum()),
            "num_lone_queries": int((of_class & lone).sum()),
        }
    return counts


def evaluate(
    model: nn.Module,
    split: EvalSplit,
    spec: EvalSpec,
    *,
    device: torch.device | str,
    precision: Precision,
    batch_size: int,
    num_workers: int | str = 0,
    train_split: Optional[LabelledDataset] = None,
    embed_fn: Optional[Callable[..., tuple[torch.Tensor, torch.Tensor]]] = None,
    progress: bool = False,
) -> EvalReport:
    """The report of ``spec`` for ``model`` on an :class:`~gspdml.data.base.EvalSplit`, embedded
    on ``device`` at ``precision`` (module docstring). ``train_split``: embedded for a step that
    learns on training embeddings; ``embed_fn(model, dataset, **options)`` replaces
    :func:`gspdml.models.inference.embed` (the trainer's data-parallel embedder)."""
    device = resolve_device(device) if isinstance(device, str) else device
    choice = resolve_precision(precision, device)
    model = placed(model, device, choice)  # as the trainer holds it
    options: dict[str, Any] = dict(batch_size=batch_size, device=device, precision=choice)
    # re-ranking's sparse algebra (scipy) runs on the host: no embeddings left on the device
    options.update(num_workers=num_workers, on_device=not spec.postprocess)
    if progress:
        options["progress"] = True
    embed_fn = embed_fn or embed
    train = None
    if spec.needs_training_embeddings:
        if train_split is None:
            raise ConfigError(
                "evaluation.postprocess",
                "PCA-whitening learns on the training split; pass train_split",
            )
        train = embed_fn(model, train_split, **options)[0]
    embeddings = split_embeddings(model, split, embed_fn, **options)
    return evaluate_embeddings(*embeddings, spec=spec, train=train, precision=choice)
