"""gspdml.evaluation: exact kNN, the retrieval-results type shared with search and reports,
the metric registry and the retrieval metrics, post-processing, the evaluation service
(:func:`evaluate`, :func:`evaluate_embeddings`, per query and per class :func:`evaluate_queries`) and the fair protocol's aggregation."""

from gspdml.evaluation.aggregate import concatenate_embeddings, fair_protocol_results, l2_normalize
from gspdml.evaluation.clustering import clustering_scores, kmeans_assignments
from gspdml.evaluation.exact_knn import KnnStats, knn, retrieve
from gspdml.evaluation.metrics import metrics_from_results, per_query_scores, retrieval_metrics
from gspdml.evaluation.results import RetrievalResults
from gspdml.evaluation.service import (
    EvalReport,
    EvalSpec,
    QueryEvaluation,
    evaluate,
    evaluate_embeddings,
    evaluate_queries,
)
from gspdml.evaluation.statistics import mean_std

__all__ = [
    "EvalReport",
    "EvalSpec",
    "KnnStats",
    "QueryEvaluation",
    "RetrievalResults",
    "clustering_scores",
    "concatenate_embeddings",
    "evaluate",
    "evaluate_embeddings",
    "evaluate_queries",
    "fair_protocol_results",
    "kmeans_assignments",
    "knn",
    "l2_normalize",
    "mean_std",
    "metrics_from_results",
    "per_query_scores",
    "retrieval_metrics",
    "retrieve",
]
