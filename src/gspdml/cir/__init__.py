"""Composed image retrieval with a frozen vision–language model (Psomas thesis, chapters 4–5):
FreeDom (domain conversion) and its benchmarks' readers, WeiCom (remote sensing), their baselines, the PatternCom protocol
and the mAP/Recall@k of the authors' code.

The core needs only torch; open_clip and transformers are optional (``load_model``)."""

from .backends import clip_preprocess, load_model
from .baselines import BASELINES, baseline_scores
from .composition_protocol import (
    CompositionProtocol,
    CompositionQuery,
    domain_conversion_protocol,
    evaluate_protocol,
)
from .domain_datasets import (
    DOMAIN_DATASETS,
    DomainDataset,
    domain_dataset_protocol,
    read_image_list,
)
from .evaluation import METHODS as CIR_METHODS
from .evaluation import CirMethod, evaluate_cir
from .features import FeatureCache, encode_image_files, encode_texts
from .freedom import VARIANTS as FREEDOM_VARIANTS
from .freedom import (
    FreeDom,
    TextLabels,
    TextMemory,
    expanded_inversion,
    nn_inversion,
    read_vocabulary,
)
from .patterncom import TABLE_5_1, read_patterncom, table_mismatches
from .ranking import average_precision, ranking_metrics
from .vl_model import (
    OptionalDependencyError,
    VisionLanguageEncoder,
    VisionLanguageModel,
    WeightsUnavailableError,
    load_state_dict_file,
    load_weights,
)
from .weicom import cdf_normalize, default_lambda, weicom_fuse, weicom_scores

__all__ = [
    "clip_preprocess",
    "load_model",
    "BASELINES",
    "baseline_scores",
    "DOMAIN_DATASETS",
    "DomainDataset",
    "domain_dataset_protocol",
    "read_image_list",
    "CIR_METHODS",
    "CirMethod",
    "evaluate_cir",
    "FeatureCache",
    "encode_image_files",
    "encode_texts",
    "FREEDOM_VARIANTS",
    "FreeDom",
    "TextLabels",
    "TextMemory",
    "expanded_inversion",
    "nn_inversion",
    "read_vocabulary",
    "average_precision",
    "ranking_metrics",
    "TABLE_5_1",
    "read_patterncom",
    "table_mismatches",
    "CompositionProtocol",
    "CompositionQuery",
    "domain_conversion_protocol",
    "evaluate_protocol",
    "OptionalDependencyError",
    "VisionLanguageEncoder",
    "VisionLanguageModel",
    "WeightsUnavailableError",
    "load_state_dict_file",
    "load_weights",
    "cdf_normalize",
    "default_lambda",
    "weicom_fuse",
    "weicom_scores",
]
