"""SimPool's fine-grained retrieval without fine-tuning (Psomas thesis Table 3.9), transcribed as
printed (:mod:`gspdml.workflows.reproduce.registry`).

ResNet-50 and ViT-S, pre-trained on ImageNet-1k for 100 epochs with supervision or with DINO,
with their default pooling (Baseline: GAP for ResNet-50, the [CLS] token for ViT-S) or SimPool;
the features of each dataset's test images are ranked by nearest-neighbour search (protocol
``frozen``, :mod:`gspdml.workflows.reproduce.frozen_run`). A row evaluates the authors' released
checkpoint (github.com/billpsomas/simpool, published on the Hugging Face hub): the DINO
ResNet-50 models (GAP, and SimPool with gamma 2) and the ViT-S/16 models, DINO and supervised
(the [CLS] token, and SimPool with gamma 1.25), in the authors' architecture
(:mod:`gspdml.models.released_vit`). The supervised ResNet-50 models were not released.
"""

from __future__ import annotations

from typing import Any, Optional

from gspdml.workflows.reproduce.frozen_spec import FrozenSpec
from gspdml.workflows.reproduce.registry import Reported, Row, Table, recall_columns

HUB = "https://huggingface.co/billpsomas"


def _released(
    repo: str, pooling: str, gamma: Optional[float], file: Optional[str] = None, **options: Any
) -> FrozenSpec:
    """The model published on the hub as ``repo``/``file`` (``repo.pth`` unless named)."""
    file = file or f"{repo}.pth"
    return FrozenSpec(file, f"{HUB}/{repo}/resolve/main/{file}", pooling, gamma=gamma, **options)


#: the released models: (supervision, network, method) -> the file and how it pools. ViT-S
#: with SimPool: gamma 1.25, the transformers' value (Psomas thesis §3.4.4); the DINO model
#: normalises the pooled vector with the final LayerNorm (gspdml.models.released_vit).
RELEASED = {
    ("DINO", "ResNet-50", "Baseline"): _released("resnet50_dino_official_ep100", "gap", None),
    ("DINO", "ResNet-50", "SimPool"): _released("resnet50_dino_simpool_ep100", "simpool", 2.0),
    ("DINO", "ViT-S", "Baseline"): _released(
        "vits_dino_official_ep100", "cls", None, backbone="vit"
    ),
    ("DINO", "ViT-S", "SimPool"): _released(
        "vits_dino_simpool_ep100", "simpool", 1.25, backbone="vit", pooled_norm=True
    ),
    ("Supervised", "ViT-S", "Baseline"): _released(
        "vits_supervised_official_ep100",
        "cls",
        None,
        backbone="vit",
        file="vits_supervised_official_ep100.pth.tar",
    ),
    ("Supervised", "ViT-S", "SimPool"): _released(
        "vits_supervised_simpool_ep100",
        "simpool",
        1.25,
        backbone="vit",
        file="vits_gem1.25_supervised_beta.pth.tar",
    ),
}
NOT_RELEASED = (
    "no released checkpoint (the authors' supervised release has ViT-S models only; the "
    "supervised ResNet-50 models of the table were not published)"
)

COLUMNS = recall_columns(1, 2, 4, 10, 20, 100, group="test")
#: the datasets of the table, left to right, with the titles of their columns
DATASETS = (
    ("cub", ("R@1", "R@2", "R@4")),
    ("cars", ("R@1", "R@2", "R@4")),
    ("sop", ("R@1", "R@10", "R@100")),
    ("inshop", ("R@1", "R@10", "R@20")),
)
#: ``SUPERVISION NETWORK METHOD`` and its 12 cells, as printed
PRINTED = """
Supervised ResNet-50 Baseline  42.7 55.2 67.7 42.3 54.2 65.7 48.3 63.2 71.8 27.6 49.9 56.5
Supervised ResNet-50 SimPool   43.0 55.2 67.9 43.8 56.2 67.4 48.7 64.1 72.9 27.0 49.9 56.5
Supervised ViT-S     Baseline  55.8 68.3 78.3 38.2 50.3 61.8 54.1 69.2 81.6 30.9 56.5 63.2
Supervised ViT-S     SimPool   56.8 69.6 79.2 38.9 50.7 63.3 54.2 69.4 81.9 32.8 57.6 64.3
DINO       ResNet-50 Baseline  26.0 36.2 46.9 34.1 44.2 55.0 51.2 65.3 76.5 37.1 58.4 64.1
DINO       ResNet-50 SimPool   30.7 40.9 53.3 33.6 43.6 54.3 52.1 66.5 77.2 38.1 60.0 65.6
DINO       ViT-S     Baseline  56.7 69.4 80.5 37.5 47.5 58.4 59.8 74.4 85.4 40.4 63.9 70.3
DINO       ViT-S     SimPool   61.8 74.4 83.6 37.6 48.0 58.4 59.5 73.9 85.0 41.1 64.3 70.8
"""


def _rows(text: str) -> tuple[Row, ...]:
    """One row per printed line and dataset, labelled ``SUPERVISION/NETWORK/METHOD``."""
    rows = []
    for line in text.strip().splitlines():
        supervision, network, method, *cells = line.split()
        label = f"{supervision}/{network}/{method}"
        spec = RELEASED.get((supervision, network, method))
        missing = None if spec is not None else NOT_RELEASED
        for d, (dataset, titles) in enumerate(DATASETS):
            own = cells[3 * d : 3 * d + 3]
            paper = {title: Reported(float(value)) for title, value in zip(titles, own)}
            rows.append(Row(label, dataset, paper, missing=missing, frozen=spec))
    return tuple(rows)


SIMPOOL_TABLE_3_9 = Table(
    "simpool-table3.9",
    "Fine-grained retrieval Recall@K without fine-tuning, ImageNet-1k pre-training (100 epochs)",
    "Psomas thesis, Table 3.9",
    "frozen",
    COLUMNS,
    _rows(PRINTED),
    seeds=(),
    notes=(
        "Runnable rows evaluate the authors' released checkpoints (github.com/billpsomas/simpool): "
        "give checkpoints=DIR holding the files under their published names (--dry-run lists "
        "them with their URLs)."
    ),
)

TABLES = (SIMPOOL_TABLE_3_9,)
