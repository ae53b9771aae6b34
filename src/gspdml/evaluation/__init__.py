"""gspdml.evaluation: exact kNN, the retrieval-results type shared with search and reports,
retrieval metrics and the fair protocol's aggregation."""

from gspdml.evaluation.aggregate import concatenate_embeddings, fair_protocol_results, l2_normalize
from gspdml.evaluation.clustering import clustering_scores, kmeans_assignments
from gspdml.evaluation.exact_knn import KnnStats, knn, retrieve
from gspdml.evaluation.metrics import metrics_from_results, per_query_scores, retrieval_metrics
from gspdml.evaluation.results import RetrievalResults

__all__ = [
    "KnnStats",
    "RetrievalResults",
    "clustering_scores",
    "concatenate_embeddings",
    "fair_protocol_results",
    "kmeans_assignments",
    "knn",
    "l2_normalize",
    "metrics_from_results",
    "per_query_scores",
    "retrieval_metrics",
    "retrieve",
]
