"""The Oxford Flowers-102 reader on tiny trees in the official layout (jpg/image_NNNNN.jpg,
imagelabels.mat, setid.mat written with scipy.io.savemat as MATLAB writes them: 1 x n arrays)."""

import numpy as np
import pytest
from scipy.io import savemat

from gspdml.data.flowers102 import read_flowers102
from gspdml.errors import DataError
from tests.helpers.datasets import write_image


def make_flowers(root, labels, trn, val, tst):
    """The release for ``labels`` (1-based classes of images 1..n) and 1-based image numbers."""
    for i in range(1, len(labels) + 1):
        write_image(root / "jpg" / f"image_{i:05d}.jpg", size=(12, 10), seed=i, fmt="JPEG")
    savemat(root / "imagelabels.mat", {"labels": np.asarray([labels], dtype=np.uint8)})
    ids = {"trnid": trn, "valid": val, "tstid": tst}
    savemat(root / "setid.mat", {k: np.asarray([v], dtype=np.uint16) for k, v in ids.items()})
    return root


#: 3 classes, 9 images; the parts in the release's shuffled order
LABELS = [2, 1, 3, 1, 2, 3, 3, 1, 2]
PARTS = ([5, 2, 7], [9, 4, 3], [1, 6, 8])


def test_the_parts_are_the_images_setid_names_with_their_0_based_labels(tmp_path):
    flowers = read_flowers102(make_flowers(tmp_path, LABELS, *PARTS))
    paths, labels = flowers.part("train", "val")
    # an independent reading: image numbers of trnid + valid, sorted, and their classes - 1
    numbers = sorted(PARTS[0] + PARTS[1])
    assert [p.name for p in paths] == [f"image_{n:05d}.jpg" for n in numbers]
    assert labels.tolist() == [LABELS[n - 1] - 1 for n in numbers]
    test_paths, test_labels = flowers.part("test")
    assert [p.name for p in test_paths] == ["image_00001.jpg", "image_00006.jpg", "image_00008.jpg"]
    assert test_labels.tolist() == [1, 2, 0]


def test_broken_releases_name_the_file_and_field(tmp_path):
    root = make_flowers(tmp_path / "a", LABELS, *PARTS)
    (root / "jpg" / "image_00004.jpg").unlink()
    with pytest.raises(DataError, match=r"image_00004\.jpg: not found \(1 of the 9"):
        read_flowers102(root)
    root = make_flowers(tmp_path / "b", [1, 2, 103], [1], [2], [3])
    with pytest.raises(
        DataError, match=r"imagelabels\.mat: 'labels' must be classes 1\.\.102, got \[103\]"
    ):
        read_flowers102(root)
    root = make_flowers(tmp_path / "c", [1, 2, 3], [1], [2], [3, 4])
    with pytest.raises(DataError, match=r"setid\.mat: 'tstid' names image 4, outside 1\.\.3"):
        read_flowers102(root)
    root = make_flowers(tmp_path / "d", [1, 2, 3], [1], [1], [3])
    with pytest.raises(DataError, match="appears twice"):
        read_flowers102(root)
    savemat(root / "setid.mat", {"trnid": np.asarray([[1]])})
    with pytest.raises(DataError, match=r"setid\.mat: no field 'valid' \(fields: \['trnid'\]\)"):
        read_flowers102(root)
    (root / "imagelabels.mat").unlink()
    with pytest.raises(DataError, match=r"imagelabels\.mat: file not found"):
        read_flowers102(root)
