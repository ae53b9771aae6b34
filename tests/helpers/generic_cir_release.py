"""Tiny trees of the generic composed-retrieval benchmarks in their official release layouts
(Fashion-IQ, CIRR, CIRCO; see gspdml.cir.generic_datasets), with random images. Each database
holds at least 21 images, so FreeDom's default k = 20 proxies fit."""

import json

import numpy as np
from PIL import Image

WORDS = ("red", "blue", "long", "short", "sleeve", "dog", "cat", "two", "more", "grass")


def _image(path, rng):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(path)


def _sentence(rng, words=3):
    return " ".join(rng.choice(WORDS, size=words))


def write_fashioniq(root, per_category=7, queries=4, seed=0):
    """``root/FashionIQ``; returns ``{category: (names, caption entries)}``."""
    rng = np.random.default_rng(seed)
    folder = root / "FashionIQ"
    written = {}
    for c, category in enumerate(("dress", "shirt", "toptee")):
        names = [f"B0{c}{category}{i}" for i in range(per_category)]
        for i, name in enumerate(names):
            _image(folder / "images" / f"{name}{'.png' if i % 2 else '.jpg'}", rng)
        entries = []
        for _ in range(queries):
            candidate, target = rng.choice(per_category, size=2, replace=False)
            entries.append(
                {
                    "target": names[target],
                    "candidate": names[candidate],
                    "captions": [_sentence(rng) + ".", _sentence(rng)],
                }
            )
        (folder / "image_splits").mkdir(parents=True, exist_ok=True)
        (folder / "captions").mkdir(parents=True, exist_ok=True)
        (folder / "image_splits" / f"split.{category}.val.json").write_text(json.dumps(names))
        (folder / "captions" / f"cap.{category}.val.json").write_text(json.dumps(entries))
        written[category] = (names, entries)
    return written


def write_cirr(root, images=22, queries=5, seed=1):
    """``root/CIRR``; returns (names, caption entries)."""
    rng = np.random.default_rng(seed)
    folder = root / "CIRR"
    names = [f"dev-{i // 6}-{i % 6}-img{i % 6}" for i in range(images)]
    paths = {name: f"./dev/{i // 6}/{name}.png" for i, name in enumerate(names)}
    for relative in paths.values():
        _image(folder / relative, rng)
    entries = []
    for q in range(queries):
        members = [names[int(i)] for i in rng.choice(images, size=6, replace=False)]
        entries.append(
            {
                "pairid": q,
                "reference": members[0],
                "target_hard": members[int(rng.integers(1, 6))],
                "target_soft": {},
                "caption": _sentence(rng, 4),
                "img_set": {"id": q, "members": list(rng.permutation(members))},
            }
        )
    (folder / "cirr" / "image_splits").mkdir(parents=True)
    (folder / "cirr" / "captions").mkdir(parents=True)
    (folder / "cirr" / "image_splits" / "split.rc2.val.json").write_text(json.dumps(paths))
    (folder / "cirr" / "captions" / "cap.rc2.val.json").write_text(json.dumps(entries))
    return names, entries


def write_circo(root, images=22, queries=5, seed=2):
    """``root/CIRCO``; returns (image ids, annotation entries)."""
    rng = np.random.default_rng(seed)
    folder = root / "CIRCO"
    ids = [int(i) for i in rng.choice(10**6, size=images, replace=False)]
    info = {"images": [{"id": i, "file_name": f"{i:012d}.jpg"} for i in ids]}
    for i in ids:
        _image(folder / "COCO2017_unlabeled" / "unlabeled2017" / f"{i:012d}.jpg", rng)
    (folder / "COCO2017_unlabeled" / "annotations").mkdir(parents=True)
    (folder / "COCO2017_unlabeled" / "annotations" / "image_info_unlabeled2017.json").write_text(
        json.dumps(info)
    )
    entries = []
    for q in range(queries):
        chosen = [ids[int(i)] for i in rng.choice(images, size=1 + 1 + q % 4, replace=False)]
        entries.append(
            {
                "id": q,
                "reference_img_id": chosen[0],
                "target_img_id": chosen[1],
                "gt_img_ids": chosen[1:],
                "relative_caption": _sentence(rng, 4),
                "shared_concept": _sentence(rng, 1),
                "semantic_aspects": [],
            }
        )
    (folder / "annotations").mkdir(parents=True)
    (folder / "annotations" / "val.json").write_text(json.dumps(entries))
    return ids, entries


def write_generic_release(root):
    """All three benchmarks under ``root``."""
    return write_fashioniq(root), write_cirr(root), write_circo(root)
