"""Drop-in calls for users of the peer libraries: change an import, keep the code.

- :class:`AccuracyCalculator` is shaped as pytorch-metric-learning's (``utils.accuracy_calculator``,
  v2.9): same constructor, ``get_accuracy``, metric names and values
  (:mod:`gspdml.evaluation.compat.pml`), on gspdml's exact search.
- :func:`calc_retrieval_metrics` is shaped as open-metric-learning's
  (``oml.functional.metrics``): ``{"cmc": {k: ...}, "precision": {k: ...}, "map": {k: ...}}``;
  :func:`flatten_dict` gives the keys OML logs (``cmc/1``, ``map/5``)
  (:mod:`gspdml.evaluation.compat.oml`).

Both compute with the registered metrics (PML's ``mean_average_precision`` with ``k`` is
``map_at_k``, its ``mean_reciprocal_rank`` ``mrr_at_k``; OML's ``map@k`` is ``map_hits_at_k``,
``precision@k`` ``precision_capped_at_k``, ``cmc@k`` ``recall_at``) and, where nothing can be
scored, return what the peer returns, where gspdml's own entry points raise.
"""

from gspdml.evaluation.compat.oml import calc_retrieval_metrics, flatten_dict
from gspdml.evaluation.compat.pml import AccuracyCalculator

__all__ = ["AccuracyCalculator", "calc_retrieval_metrics", "flatten_dict"]
