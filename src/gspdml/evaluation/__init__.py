"""gspdml.evaluation: exact kNN, retrieval metrics, fair-protocol folds and aggregation."""

from gspdml.evaluation.clustering import clustering_scores, kmeans_assignments
from gspdml.evaluation.knn import RetrievalResults, knn, retrieve
from gspdml.evaluation.metrics import metrics_from_results, per_query_scores, retrieval_metrics

__all__ = [
    "RetrievalResults",
    "clustering_scores",
    "kmeans_assignments",
    "knn",
    "metrics_from_results",
    "per_query_scores",
    "retrieval_metrics",
    "retrieve",
]
