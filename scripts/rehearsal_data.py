"""Synthetic datasets in the official layouts of CUB-200-2011, Cars196, SOP and In-Shop, for
``scripts/rehearse.py``: one generator, four layouts.

At ``scale=1`` a layout has the published counts, read from the readers' own ``EXPECTED``
(``gspdml.data.cub``, ``cars``, ``sop``, ``inshop``): CUB 11,788 images (100 + 100 classes),
Cars196 16,185 (98 + 98), SOP 120,053 (11,318 + 11,316), In-Shop 52,712 (3,997 training items;
3,985 test items with 14,218 query and 12,612 gallery images), so the readers' count checks
(``image_splits.check_counts``) hold. A smaller ``scale`` keeps every part, with fewer classes
and images (at least one class and one image per class and part), for tests.

Classes are numbered from 1, training classes first (the official zero-shot splits are the
first half of the classes for CUB and Cars196, and the listed files for SOP and In-Shop). Each
part's images are spread over its classes at random (at least two per class where the part
has that many). Image sizes approximate each dataset's photos (:data:`LAYOUTS`, not their exact
histograms). The content is learnable: each class has its own palette and arrangement of
shapes, moved, scaled and recoloured a little per image, on a textured background; an image is
a pure function of (class, index), so the files are the same on every machine.

The work is cheap: the pixels of an image are a low-resolution texture upsampled and a few
filled shapes (no per-pixel Python), written as JPEG by Pillow, by ``workers`` processes; a
completed layout is marked and reused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Item:
    """One image: its part (``train``, ``test``, ``query``, ``gallery``), class (from 1), index
    within its class and part's images, and path relative to the layout's folder."""

    part: str
    label: int
    index: int
    path: str


@dataclass(frozen=True)
class Group:
    """Classes that share parts: ``classes`` classes, ``images`` per part of them."""

    classes: int
    images: dict[str, int]


@dataclass(frozen=True)
class Layout:
    """A dataset's official layout: its groups of classes, image sizes, where an image goes
    in the dataset's folder, and the listing files (written after the images)."""

    name: str
    groups: tuple[Group, ...]
    size: Sizes
    path: Callable[[Item], str]
    write_listing: Callable[[Path, list[Item]], None]


@dataclass(frozen=True)
class Sizes:
    """Image sizes: the longer side uniform in ``long_side``, the shorter a uniform ``ratio``
    of it, and a portrait image with probability ``portrait`` (a picklable rule, for workers)."""

    long_side: tuple[int, int]
    ratio: tuple[float, float]
    portrait: float

    def __call__(self, rng: np.random.Generator) -> tuple[int, int]:
        long = int(rng.integers(self.long_side[0], self.long_side[1] + 1))
        short = int(long * rng.uniform(*self.ratio))
        return (short, long) if rng.random() < self.portrait else (long, short)


def scaled(groups: Sequence[Group], scale: float) -> list[Group]:
    """The groups at ``scale`` (1: as given); at least one class and one image per class."""
    if scale == 1:
        return list(groups)
    out = []
    for group in groups:
        classes = max(1, round(group.classes * scale))
        images = {part: max(classes, round(count * scale)) for part, count in group.images.items()}
        out.append(Group(classes, images))
    return out


def spread(images: int, classes: int, rng: np.random.Generator) -> np.ndarray:
    """``images`` over ``classes``: each gets ``low`` (2, or 1 where there are too few), the
    rest at random (multinomial)."""
    low = min(2, images // classes)
    return low + rng.multinomial(images - low * classes, np.full(classes, 1.0 / classes))


def plan(layout: Layout, scale: float = 1.0, seed: int = 0) -> list[Item]:
    """Every image of ``layout`` at ``scale``, in listing order (by part, then class)."""
    rng = np.random.default_rng(seed)
    items: list[Item] = []
    first = 1
    for group in scaled(layout.groups, scale):
        labels = range(first, first + group.classes)
        for part, count in group.images.items():
            for label, n in zip(labels, spread(count, group.classes, rng)):
                for index in range(int(n)):
                    item = Item(part, label, index, "")
                    items.append(Item(part, label, index, layout.path(item)))
        first += group.classes
    return items


def class_design(label: int) -> dict:
    """The palette and shapes of a class (fixed by its label)."""
    rng = np.random.default_rng([label, 0xC1A55])
    return {
        "background": rng.integers(0, 256, 3),
        "shapes": [
            (rng.uniform(0.15, 0.85, 2), rng.uniform(0.08, 0.25), rng.integers(0, 256, 3), k % 3)
            for k in range(int(rng.integers(2, 5)))
        ],
    }


def draw_image(job: tuple[str, int, int, str, Sizes]) -> None:
    """One JPEG of class ``label`` (its ``index``-th image of ``part``) at ``path``."""
    from PIL import Image, ImageDraw

    path, label, index, part, size = job
    rng = np.random.default_rng([label, index, sum(part.encode()), 0x1A6E])
    width, height = size(rng)
    design = class_design(label)
    texture = rng.normal(0, 24, (height // 8 + 1, width // 8 + 1, 3))
    base = np.clip(design["background"] + texture, 0, 255).astype(np.uint8)
    image = Image.fromarray(base).resize((width, height), Image.BILINEAR)
    draw = ImageDraw.Draw(image)
    shift, scale = rng.normal(0, 0.05, 2), rng.uniform(0.8, 1.2)
    for centre, radius, colour, kind in design["shapes"]:
        cx, cy = (centre + shift) * (width, height)
        r = radius * scale * min(width, height)
        tint = tuple(int(c) for c in np.clip(colour + rng.normal(0, 12, 3), 0, 255))
        box = (cx - r, cy - r, cx + r, cy + r)
        [draw.ellipse, draw.rectangle, draw.pieslice][kind](
            box, fill=tint, **({"start": 30, "end": 330} if kind == 2 else {})
        )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    image.save(path, "JPEG", quality=90)


def write_layout(
    layout: Layout, base: Path, workers: int = 1, scale: float = 1.0, seed: int = 0
) -> Path:
    """Write ``layout`` at ``scale`` into the dataset folder ``base`` (the config's
    ``data.dataset.root``), reused when complete (a ``.complete`` file names the scale)."""
    done = base / ".complete"
    if done.is_file() and done.read_text() == f"{scale}":
        return base
    items = plan(layout, scale, seed)
    jobs = [(str(base / i.path), i.label, i.index, i.part, layout.size) for i in items]
    if workers > 1:
        with Pool(workers) as pool:
            for _ in pool.imap_unordered(draw_image, jobs, chunksize=64):
                pass
    else:
        for job in jobs:
            draw_image(job)
    layout.write_listing(base, items)
    done.write_text(f"{scale}")
    return base


def _lines(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------- CUB-200-2011
def _cub_path(item: Item) -> str:
    return f"images/{item.label:03d}.Class_{item.label}/Class_{item.label}_{item.index:04d}.jpg"


def _cub_listing(base: Path, items: list[Item]) -> None:
    """``images.txt``, ``image_class_labels.txt``, ``classes.txt`` and the classification split
    ``train_test_split.txt`` (every other image of a class; the reader ignores it)."""
    ids = range(1, len(items) + 1)
    _lines(base / "images.txt", [f"{n} {i.path[len('images/') :]}" for n, i in zip(ids, items)])
    _lines(base / "image_class_labels.txt", [f"{n} {i.label}" for n, i in zip(ids, items)])
    _lines(
        base / "train_test_split.txt", [f"{n} {int(i.index % 2 == 0)}" for n, i in zip(ids, items)]
    )
    labels = sorted({i.label for i in items})
    _lines(base / "classes.txt", [f"{c} {c:03d}.Class_{c}" for c in labels])


# ------------------------------------------------------------------------------------ Cars196
def _cars_path(item: Item) -> str:
    return f"car_ims/{item.label:03d}_{item.index:04d}.jpg"


def _cars_listing(base: Path, items: list[Item]) -> None:
    """``cars_annos.mat``: the struct array ``annotations`` (``relative_im_path``, ``class``,
    the classification ``test`` flag, every other image) and ``class_names``."""
    import scipy.io

    fields = [("relative_im_path", "O"), ("class", "O"), ("test", "O")]
    annotations = np.zeros((1, len(items)), dtype=fields)
    for n, item in enumerate(items):
        annotations[0, n] = (
            np.array([item.path]),
            np.array([[item.label]], dtype=np.uint8),
            np.array([[item.index % 2]], dtype=np.uint8),
        )
    names = np.array([f"Car {c}" for c in sorted({i.label for i in items})], dtype=object)
    scipy.io.savemat(
        str(base / "cars_annos.mat"), {"annotations": annotations, "class_names": names[None]}
    )


# --------------------------------------------------------------------- Stanford Online Products
SOP_SUPER_CLASSES = 12


def _sop_super(label: int) -> int:
    return (label - 1) % SOP_SUPER_CLASSES + 1


def _sop_path(item: Item) -> str:
    return f"super{_sop_super(item.label):02d}_final/{item.label}_{item.index}.JPG"


def _sop_listing(base: Path, items: list[Item]) -> None:
    """``Ebay_train.txt`` and ``Ebay_test.txt``: a header, then ``image_id class_id
    super_class_id path`` (image ids run on across the two files)."""
    for part in ("train", "test"):
        rows = [(n, i) for n, i in enumerate(items, start=1) if i.part == part]
        lines = [f"{n} {i.label} {_sop_super(i.label)} {i.path}" for n, i in rows]
        _lines(base / f"Ebay_{part}.txt", ["image_id class_id super_class_id path", *lines])


# ------------------------------------------------------------------------------------ In-Shop
def _inshop_name(item: Item) -> str:
    return f"img/WOMEN/Dresses/id_{item.label:08d}/{item.part}_{item.index:02d}_front.jpg"


def _inshop_path(item: Item) -> str:
    return f"Img/{_inshop_name(item)}"


def _inshop_listing(base: Path, items: list[Item]) -> None:
    """``Eval/list_eval_partition.txt``: the count, a header, then ``image_name item_id
    evaluation_status``."""
    rows = [f"{_inshop_name(i)} id_{i.label:08d} {i.part}" for i in items]
    _lines(
        base / "Eval" / "list_eval_partition.txt",
        [str(len(rows)), "image_name item_id evaluation_status", *rows],
    )


def _layouts() -> dict[str, Layout]:
    from gspdml.data import cars, cub, inshop, sop

    def halves(expected: dict[str, int]) -> tuple[Group, ...]:
        return (
            Group(expected["train_classes"], {"train": expected["train_images"]}),
            Group(expected["test_classes"], {"test": expected["test_images"]}),
        )

    e = inshop.EXPECTED
    return {
        "cub": Layout(
            "cub",
            halves(cub.EXPECTED),
            Sizes((500, 500), (0.55, 1.0), 0.2),  # the longer side 500 px
            _cub_path,
            _cub_listing,
        ),
        "cars196": Layout(
            "cars196",
            halves(cars.EXPECTED),
            Sizes((320, 1024), (0.5, 0.8), 0.02),  # wide photos of varied resolution
            _cars_path,
            _cars_listing,
        ),
        "sop": Layout(
            "sop",
            halves(sop.EXPECTED),
            Sizes((300, 640), (0.6, 1.0), 0.25),  # eBay listing photos
            _sop_path,
            _sop_listing,
        ),
        "inshop": Layout(
            "inshop",
            (
                Group(e["train_classes"], {"train": e["train_images"]}),
                Group(
                    e["test_classes"],
                    {"query": e["query_images"], "gallery": e["gallery_images"]},
                ),
            ),
            Sizes((256, 256), (1.0, 1.0), 0.0),  # the 256 x 256 release (Img/img)
            _inshop_path,
            _inshop_listing,
        ),
    }


#: the layouts by the registry names of their readers (aliases included)
ALIASES = {
    "cub": "cub",
    "cub200": "cub",
    "cars196": "cars196",
    "cars": "cars196",
    "sop": "sop",
    "stanford_online_products": "sop",
    "inshop": "inshop",
    "in_shop": "inshop",
}


def layout(dataset: str) -> Layout:
    """The layout of a dataset name as a config gives it (``cub``, ``cars196``, ``sop``,
    ``inshop`` or an alias)."""
    if dataset not in ALIASES:
        raise SystemExit(
            f"the rehearsal writes CUB, Cars196, SOP and In-Shop layouts; not {dataset!r}"
        )
    return _layouts()[ALIASES[dataset]]


def total_images(layout: Layout, scale: float = 1.0) -> int:
    return sum(sum(g.images.values()) for g in scaled(layout.groups, scale))
