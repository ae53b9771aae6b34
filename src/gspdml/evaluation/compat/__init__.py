"""Drop-in calls for users of the peer libraries: change an import, keep the code.

- :class:`AccuracyCalculator` is shaped as pytorch-metric-learning's
  (``pytorch_metric_learning.utils.accuracy_calculator``, v2.9): same constructor, same
  ``get_accuracy(query, query_labels, reference, reference_labels, ref_includes_query)``, same
  metric names and values (:mod:`gspdml.evaluation.compat.pml`), on gspdml's exact search.
- :func:`calc_retrieval_metrics` is shaped as open-metric-learning's
  (``oml.functional.metrics.calc_retrieval_metrics``): the retrieved and relevant gallery ids of
  every query in, ``{"cmc": {k: ...}, "precision": {k: ...}, "map": {k: ...}}`` out;
  :func:`flatten_dict` gives the keys OML logs (``cmc/1``, ``map/5``, ``precision/5``)
  (:mod:`gspdml.evaluation.compat.oml`).

Both compute with the registered metrics (:mod:`gspdml.evaluation.metrics`): PML's
``mean_average_precision`` with ``k`` is ``map_at_k``, its ``mean_reciprocal_rank`` is
``mrr_at_k``; OML's ``map@k`` is ``map_hits_at_k``, ``precision@k`` is
``precision_capped_at_k``, ``cmc@k`` is ``recall_at``. Where nothing can be scored they return
what the peer returns (PML: NaN; OML: its values for queries without relevant items), where
gspdml's own entry points stop with an error.
"""

from gspdml.evaluation.compat.oml import calc_retrieval_metrics, flatten_dict
from gspdml.evaluation.compat.pml import AccuracyCalculator

__all__ = ["AccuracyCalculator", "calc_retrieval_metrics", "flatten_dict"]
