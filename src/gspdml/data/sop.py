"""Stanford Online Products in its official layout::

    <root>/[Stanford_Online_Products/]Ebay_train.txt   "image_id class_id super_class_id path" (header line)
    <root>/[Stanford_Online_Products/]Ebay_test.txt
    <root>/[Stanford_Online_Products/]<path>           e.g. bicycle_final/111085122871_0.JPG

The official files are the zero-shot split (Gürbüz thesis §5.3.4.1): 11,318 training classes (59,551 images)
and 11,316 test classes (60,502 images).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gspdml.data.image_splits import OfficialSplits, Records, register_image_dataset
from gspdml.data.textfiles import find_dir, read_columns

SOURCE = "Stanford Online Products"
EXPECTED = dict(
    images=120053, train_images=59551, test_images=60502, train_classes=11318, test_classes=11316
)


#: a line of Ebay_train.txt and Ebay_test.txt
class _Entry(NamedTuple):
    image_id: int
    class_id: int
    super_class_id: int
    path: str


@register_image_dataset("sop", "stanford_online_products")
def read_sop(root: str) -> OfficialSplits:
    """Stanford Online Products, the official 11,318/11,316 class split (see :mod:`gspdml.data.sop`).

    Args:
        root: the dataset's folder (``Ebay_train.txt`` and ``Ebay_test.txt``).
    """
    base = find_dir(root, "Ebay_train.txt", [".", "Stanford_Online_Products"], SOURCE)
    parts = {}
    for name in ("train", "test"):
        rows = read_columns(base / f"Ebay_{name}.txt", _Entry, SOURCE, skip=1)
        parts[name] = Records(
            [str(base / r.path) for r in rows], np.array([r.class_id for r in rows])
        )
    return OfficialSplits(train=parts["train"], test=parts["test"]).checked(SOURCE, EXPECTED)
