"""Tiny trees in the layout of the FreeDom release (github.com/NikosEfth/freedom): ``data/<name>/``
with JPEG images and ``PATH DOMAIN CLASS`` image lists."""

import numpy as np
from PIL import Image

from gspdml.cir.domain_datasets import DOMAIN_DATASETS

# (domain labels, classes, images per class and domain, query images per class and domain)
LAYOUTS = {
    "imagenet_r": (("cartoon", "origami", "real", "sculpture", "toy"), ("n01", "n02"), 2, None),
    "minidn": (("clipart", "painting", "real", "sketch"), ("ant", "axe", "bus"), 3, 1),
    "nico": (("autumn", "dim", "grass", "outdoor", "rock", "water"), ("bear", "car"), 3, 1),
    "ltll": (("New", "Old"), ("TajMahal", "Q302", "BigBen"), 2, None),
}


def write_release_tree(data, name):
    """``data/<name>/`` with JPEG images and its list files; returns (database, queries) lines."""
    labels, classes, per, query_per = LAYOUTS[name]
    rng = np.random.default_rng(len(name))
    database, queries = [], []
    for domain in labels:
        for cls in classes:
            for i in range(per):
                relative = f"{name}/{domain}/{cls}/{domain}_{cls}_{i}.jpg"
                (data / relative).parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(
                    data / relative
                )
                is_query = query_per is not None and i < query_per
                (queries if is_query else database).append(f"{relative} {domain} {cls}")
    spec = DOMAIN_DATASETS[name]
    (data / name / spec.database).write_text("\n".join(database) + "\n")
    if spec.queries is not None:
        (data / name / spec.queries).write_text("\n".join(queries) + "\n")
    return database, queries or database
