"""Tiny trees in the official dataset layouts (CUB-200-2011, Cars196, SOP, In-Shop).

Each writer takes the ``write_image`` fixture of ``tests/data/conftest.py`` so the images are real
JPEG files; the annotation files follow the layouts the readers in ``gspdml.data`` parse.
"""

import numpy as np
import scipy.io

SMALL = {"resize": 12, "crop": 10}


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


def make_sop(root, write_image, shared=False):
    base = root / "Stanford_Online_Products"
    splits = {"train": range(1, 5), "test": range(4 if shared else 5, 9)}
    n = 0
    for split, classes in splits.items():
        lines = ["image_id class_id super_class_id path"]
        for c in classes:
            for k in range(2):
                n += 1
                rel = f"bike_final/{c}_{k}.JPG"
                write_image(base / rel, fmt="JPEG", seed=n)
                lines.append(f"{n} {c} 1 {rel}")
        (base / f"Ebay_{split}.txt").write_text("\n".join(lines) + "\n")
    return base


def make_inshop(root, write_image, declared=None):
    rows = []
    for item in range(1, 9):
        for k in range(3):
            name = f"img/WOMEN/Dresses/id_{item:08d}/{k:02d}_front.jpg"
            write_image(root / "Img" / name, fmt="JPEG", seed=item * 10 + k)
            status = "train" if item <= 4 else ("query" if k == 0 else "gallery")
            rows.append(f"{name} id_{item:08d} {status}")
    header = ["image_name item_id evaluation_status"]
    text = "\n".join([str(declared or len(rows))] + header + rows) + "\n"
    (root / "Eval").mkdir(parents=True, exist_ok=True)
    (root / "Eval" / "list_eval_partition.txt").write_text(text)
