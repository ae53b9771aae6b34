"""In-Shop Clothes Retrieval (DeepFashion) in its official layout::

    <root>/[Eval/]list_eval_partition.txt   line 1: count; line 2: header;
                                            then "image_name item_id evaluation_status"
    <root>/[Img/]<image_name>               e.g. img/WOMEN/Dresses/id_00000002/02_1_front.jpg

``evaluation_status`` is ``train``, ``query`` or ``gallery``. The zero-shot split (Gürbüz thesis §5.3.4.1):
3,997 training items (25,882 images); 3,985 test items with 14,218 query and 12,612 gallery
images. Retrieval is query → gallery.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from gspdml.data.image_splits import OfficialSplits, Records, register_image_dataset
from gspdml.data.textfiles import find_dir, read_columns
from gspdml.errors import DataError

SOURCE = "In-Shop"
EXPECTED = dict(
    images=52712,
    train_images=25882,
    query_images=14218,
    gallery_images=12612,
    train_classes=3997,
    test_classes=3985,
)
STATUSES = ("train", "query", "gallery")


#: a line of list_eval_partition.txt
class _Entry(NamedTuple):
    image_name: str
    item_id: str
    evaluation_status: str


def _item_number(item: str, path: Path) -> int:
    if not (item.startswith("id_") and item[3:].isdigit()):
        raise DataError(f"{path}: item_id must look like id_00000001, got {item!r}")
    return int(item[3:])


@register_image_dataset("inshop", "in_shop")
def read_inshop(root: str) -> OfficialSplits:
    """In-Shop, the official 3,997/3,985 item split with query and gallery (see :mod:`gspdml.data.inshop`).

    Args:
        root: the dataset's folder (``list_eval_partition.txt``).
    """
    base = find_dir(root, "list_eval_partition.txt", ["Eval", "."], SOURCE)
    listing = base / "list_eval_partition.txt"
    rows = read_columns(listing, _Entry, SOURCE, skip=2)
    declared = listing.read_text(encoding="utf-8").split("\n", 1)[0].strip()
    if declared != str(len(rows)):
        raise DataError(f"{listing}:1: declares {declared!r} entries but lists {len(rows)}")
    top = base.parent if base.name == "Eval" else base
    image_root = top / "Img" if (top / "Img" / rows[0].image_name).exists() else top
    parts = {}
    for status in STATUSES:
        chosen = [r for r in rows if r.evaluation_status == status]
        parts[status] = Records(
            [str(image_root / r.image_name) for r in chosen],
            np.array([_item_number(r.item_id, listing) for r in chosen], dtype=np.int64),
            {_item_number(r.item_id, listing): r.item_id for r in chosen},
        )
    unknown = sorted({r.evaluation_status for r in rows} - set(STATUSES))
    if unknown:
        raise DataError(
            f"{listing}: unknown evaluation_status {unknown}; expected one of {', '.join(STATUSES)}"
        )
    official = OfficialSplits(train=parts["train"], query=parts["query"], gallery=parts["gallery"])
    return official.checked(SOURCE, EXPECTED)
