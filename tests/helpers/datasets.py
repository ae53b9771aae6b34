"""Tiny trees in the official dataset layouts (CUB-200-2011, Cars196, SOP, In-Shop).

Each writer takes an image writer, :func:`write_image` (the ``write_image`` fixture of
``tests/data/conftest.py``), so the images are real JPEG files; the annotation files follow the
layouts the readers in ``gspdml.data`` parse.
"""

from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image

SMALL = {"resize": 12, "crop": 10}


def write_image(path, size=(10, 8), color=None, fmt=None, seed=0):
    """Write a small RGB image (random pixels unless ``color``) and return its path as str."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if color is None:
        pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        image = Image.fromarray(pixels, "RGB")
    else:
        image = Image.new("RGB", size, color)
    image.save(path, format=fmt)
    return str(path)


def make_cub(root, write_image, classes=6, per_class=3):
    base = root / "CUB_200_2011"
    lines, labels, names = [], [], []
    n = 0
    for c in range(1, classes + 1):
        names.append(f"{c} {c:03d}.Bird_{c}")
        for _ in range(per_class + c % 2):  # uneven class sizes
            n += 1
            rel = f"{c:03d}.Bird_{c}/img_{n}.jpg"
            write_image(base / "images" / rel, fmt="JPEG", seed=n)
            lines.append(f"{n} {rel}")
            labels.append(f"{n} {c}")
    (base / "images.txt").write_text("\n".join(lines) + "\n")
    (base / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (base / "classes.txt").write_text("\n".join(names) + "\n")
    (base / "train_test_split.txt").write_text("\n".join(f"{i} {i % 2}" for i in range(1, n + 1)))
    return base


def cars_mat(path, rows, names):
    ann = np.zeros((1, len(rows)), dtype=[("relative_im_path", "O"), ("class", "O"), ("test", "O")])
    for i, (rel, c, t) in enumerate(rows):
        ann[0, i] = (
            np.array([rel]),
            np.array([[c]], dtype=np.uint8),
            np.array([[t]], dtype=np.uint8),
        )
    scipy.io.savemat(
        str(path), {"annotations": ann, "class_names": np.array(names, dtype=object)[None]}
    )


def make_cars(root, write_image, classes=8, per_class=2):
    """Cars196's original release: ``cars_annos.mat`` + ``car_ims/``; the ``test`` flag (the
    classification split) alternates, so it mixes every class, as the real one does."""
    rows = []
    for i in range(classes * per_class):
        rel = f"car_ims/{i + 1:06d}.jpg"
        write_image(root / rel, fmt="JPEG", seed=i)
        rows.append((rel, i % classes + 1, i % 2))
    cars_mat(root / "cars_annos.mat", rows, [f"Car {c}" for c in range(1, classes + 1)])
    return root


def devkit_mat(path, rows):
    """A devkit annotation file: struct array ``annotations`` with ``fname`` and ``class``."""
    ann = np.zeros((1, len(rows)), dtype=[("bbox_x1", "O"), ("class", "O"), ("fname", "O")])
    for i, (fname, c) in enumerate(rows):
        ann[0, i] = (
            np.array([[0]], dtype=np.uint8),
            np.array([[c]], dtype=np.uint8),
            np.array([fname]),
        )
    scipy.io.savemat(str(path), {"annotations": ann})


def make_cars_devkit(root, write_image, classes=6, per_class=4):
    """Cars196's devkit release: both classification halves mix every class, as the real one."""
    halves = {"cars_train": [], "cars_test": []}
    for i in range(classes * per_class):
        folder = "cars_train" if i % 2 == 0 else "cars_test"
        fname = f"{i + 1:05d}.jpg"
        write_image(root / folder / fname, fmt="JPEG", seed=i)
        halves[folder].append((fname, i % classes + 1))
    (root / "devkit").mkdir(parents=True, exist_ok=True)
    devkit_mat(root / "devkit" / "cars_train_annos.mat", halves["cars_train"])
    devkit_mat(root / "cars_test_annos_withlabels.mat", halves["cars_test"])
    names = np.array([f"Car {c}" for c in range(1, classes + 1)], dtype=object)[None]
    scipy.io.savemat(str(root / "devkit" / "cars_meta.mat"), {"class_names": names})
    return halves


def make_sop(root, write_image, shared=False, train_classes=4, test_classes=4, per_class=2):
    """``Ebay_train.txt`` / ``Ebay_test.txt``: classes 1..train_classes train, the next
    ``test_classes`` test (``shared``: the last training class is in both, a malformed copy)."""
    base = root / "Stanford_Online_Products"
    first_test = train_classes + (0 if shared else 1)
    splits = {
        "train": range(1, train_classes + 1),
        "test": range(first_test, train_classes + test_classes + 1),
    }
    n = 0
    for split, classes in splits.items():
        lines = ["image_id class_id super_class_id path"]
        for c in classes:
            for k in range(per_class):
                n += 1
                rel = f"bike_final/{c}_{k}.JPG"
                write_image(base / rel, fmt="JPEG", seed=n)
                lines.append(f"{n} {c} 1 {rel}")
        (base / f"Ebay_{split}.txt").write_text("\n".join(lines) + "\n")
    return base


def make_inshop(root, write_image, declared=None, train_items=4, test_items=4, per_item=3):
    """``Eval/list_eval_partition.txt`` + ``Img/img/...``: items 1..train_items train; of each
    test item the first image is a query, the others are gallery images. ``declared``: the
    count written on the first line (default the true one)."""
    rows = []
    for item in range(1, train_items + test_items + 1):
        for k in range(per_item):
            name = f"img/WOMEN/Dresses/id_{item:08d}/{k:02d}_front.jpg"
            write_image(root / "Img" / name, fmt="JPEG", seed=item * 10 + k)
            status = "train" if item <= train_items else ("query" if k == 0 else "gallery")
            rows.append(f"{name} id_{item:08d} {status}")
    header = ["image_name item_id evaluation_status"]
    text = "\n".join([str(declared or len(rows))] + header + rows) + "\n"
    (root / "Eval").mkdir(parents=True, exist_ok=True)
    (root / "Eval" / "list_eval_partition.txt").write_text(text)


def make_imagenet(root, write_image, classes=3, train_per_class=4, val_per_class=2, val="folders"):
    """ImageNet-1k (ILSVRC2012) in its official layout: ``train/<wnid>/<wnid>_<n>.JPEG``,
    ``LOC_synset_mapping.txt`` and the validation images ``ILSVRC2012_val_<n>.JPEG`` either in
    ``val/<wnid>/`` folders (``val="folders"``) or flat in ``val/`` with their labels in
    ``LOC_val_solution.csv`` (``"solution"``) or in the devkit's ground truth and ``meta.mat``
    (``"devkit"``). The validation images are interleaved across classes, as released. Returns
    ``(wnids, {validation file name: wnid})``; the wnids are sorted, as the release's."""
    root = Path(root)
    wnids = [f"n{1440764 + 1000 * c:08d}" for c in range(classes)]
    lines = [f"{wnid} class {c}, words" for c, wnid in enumerate(wnids)]
    (root).mkdir(parents=True, exist_ok=True)
    (root / "LOC_synset_mapping.txt").write_text("\n".join(lines) + "\n")
    for c, wnid in enumerate(wnids):
        for i in range(train_per_class):
            name = f"{wnid}_{1000 + 7 * i}.JPEG"
            write_image(root / "train" / wnid / name, size=(12, 10), seed=100 * c + i, fmt="JPEG")
    truth = {}
    for n in range(classes * val_per_class):
        wnid = wnids[(n * 2 + n // classes) % classes]  # every class val_per_class times
        name = f"ILSVRC2012_val_{n + 1:08d}.JPEG"
        truth[name] = wnid
        folder = root / "val" / (wnid if val == "folders" else "")
        write_image(folder / name, size=(10, 12), seed=10000 + n, fmt="JPEG")
    if val == "solution":
        rows = [f"{name[:-5]},{wnid} 1 2 9 11 {wnid} 0 0 5 5" for name, wnid in truth.items()]
        (root / "LOC_val_solution.csv").write_text("ImageId,PredictionString\n" + "\n".join(rows))
    elif val == "devkit":
        devkit = root / "ILSVRC2012_devkit_t12" / "data"
        devkit.mkdir(parents=True)
        ids = {wnid: classes - c for c, wnid in enumerate(wnids)}  # reversed: not label + 1
        synsets = np.zeros((len(wnids), 1), dtype=[("ILSVRC2012_ID", "O"), ("WNID", "O")])
        for i, wnid in enumerate(wnids):
            synsets[i, 0] = (np.array([[ids[wnid]]], dtype=np.uint16), np.array([wnid]))
        scipy.io.savemat(str(devkit / "meta.mat"), {"synsets": synsets})
        text = "".join(f"{ids[truth[name]]}\n" for name in sorted(truth))
        (devkit / "ILSVRC2012_validation_ground_truth.txt").write_text(text)
    return wnids, truth
