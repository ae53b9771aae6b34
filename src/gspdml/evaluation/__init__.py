"""gspdml.evaluation: exact kNN, the retrieval-results type shared with search and reports,
retrieval metrics, protocol folds and the fair protocol's aggregation."""

from gspdml.evaluation.aggregate import concatenate_embeddings, fair_protocol_results, l2_normalize
from gspdml.evaluation.clustering import clustering_scores, kmeans_assignments
from gspdml.evaluation.knn import knn, retrieve
from gspdml.evaluation.metrics import metrics_from_results, per_query_scores, retrieval_metrics
from gspdml.evaluation.protocols import (
    ClassFold,
    contiguous_class_folds,
    fair_protocol_folds,
    train_test_classes,
    tuning_protocol_folds,
)
from gspdml.evaluation.results import RetrievalResults

__all__ = [
    "ClassFold",
    "RetrievalResults",
    "clustering_scores",
    "concatenate_embeddings",
    "contiguous_class_folds",
    "fair_protocol_folds",
    "fair_protocol_results",
    "kmeans_assignments",
    "knn",
    "l2_normalize",
    "metrics_from_results",
    "per_query_scores",
    "retrieval_metrics",
    "retrieve",
    "train_test_classes",
    "tuning_protocol_folds",
]
