"""Composed image retrieval with a frozen vision–language model (seed 003, chapters 4–5):
FreeDom (domain conversion), WeiCom (remote sensing), their baselines, the PatternCom protocol
and the mAP/Recall@k of the authors' code."""

from .baselines import BASELINES, baseline_scores
from .freedom import VARIANTS as FREEDOM_VARIANTS
from .freedom import FreeDom, TextLabels, TextMemory, read_vocabulary
from .metrics import average_precision, ranking_metrics
from .weicom import cdf_normalize, default_lambda, weicom_fuse, weicom_scores

__all__ = [
    "BASELINES", "baseline_scores", "FREEDOM_VARIANTS", "FreeDom", "TextLabels", "TextMemory", "read_vocabulary",
    "average_precision", "ranking_metrics", "cdf_normalize", "default_lambda", "weicom_fuse", "weicom_scores",
]
