"""The reader of the revisited Oxford and Paris releases (gspdml.data.revisited): the ground
truth read without running code and checked, the images listed, the queries cropped to their
boxes as the official revisitop example crops them."""

import os
import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from gspdml.data.recipes import IMAGENET_MEAN, IMAGENET_STD
from gspdml.data.revisited import RevisitedImages, read_revisited
from gspdml.errors import DataError
from tests.helpers.revisited import DATABASE, GROUND_TRUTH, QUERIES, make_revisited


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _write_gnd(folder, gnd, name="roxford5k"):
    with open(folder / f"gnd_{name}.pkl", "wb") as file:
        pickle.dump(gnd, file)


def test_the_release_is_read_with_its_names_boxes_and_ground_truth(tmp_path):
    folder = make_revisited(tmp_path, "rparis6k")
    release = read_revisited(tmp_path, "rparis6k")
    assert [p.name for p in release.database] == [f"{n}.jpg" for n in DATABASE]
    assert [p.parent for p in release.queries] == [folder / "jpg"] * len(QUERIES)
    assert release.boxes == ((8.0, 4.0, 56.0, 40.0), (0.0, 0.0, 48.0, 48.0))
    assert release.ground_truth[1] == {"easy": [], "hard": [3, 5], "junk": [1]}
    assert release.counts() == {
        "benchmark": "RParis6k",
        "root": str(folder),
        "images": 6,
        "classes": 2,
        "official_images": 6322,
        "official_classes": 70,
        "is_benchmark": False,
        "units": ["database images", "queries"],
    }


def test_a_ground_truth_that_would_run_code_is_refused_and_named(tmp_path):
    folder = make_revisited(tmp_path)
    marker = tmp_path / "ran"
    gnd = {"imlist": DATABASE, "qimlist": QUERIES, "gnd": [_RunsCode(marker), GROUND_TRUTH[1]]}
    _write_gnd(folder, gnd)
    with pytest.raises(DataError, match=r"gnd_roxford5k.pkl: refused to load.*(posix|os)\.system"):
        read_revisited(tmp_path, "roxford5k")
    assert not marker.exists()


def test_numpy_arrays_in_the_ground_truth_are_read_as_lists(tmp_path):
    folder = make_revisited(tmp_path)
    gnd = [{k: np.asarray(v) for k, v in entry.items()} for entry in GROUND_TRUTH]
    gnd[1]["easy"] = np.zeros(0, dtype=np.int64)
    _write_gnd(folder, {"imlist": DATABASE, "qimlist": QUERIES, "gnd": gnd})
    release = read_revisited(tmp_path, "roxford5k")
    assert release.ground_truth == tuple(
        {label: entry[label] for label in ("easy", "hard", "junk")} for entry in GROUND_TRUTH
    )
    assert release.boxes[0] == (8.0, 4.0, 56.0, 40.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hard": [2, 6]}, r"gnd\[0\]\['hard'\] has indices \[6\] outside the 6 images"),
        ({"bbx": [8, 40, 56, 4]}, r"gnd\[0\]\['bbx'\] must be a box"),
        ({"easy": "1"}, r"gnd\[0\]\['easy'\] must be a list of database indices"),
    ],
)
def test_a_bad_field_is_named_with_its_file(tmp_path, change, message):
    folder = make_revisited(tmp_path)
    gnd = [{**GROUND_TRUTH[0], **change}, GROUND_TRUTH[1]]
    _write_gnd(folder, {"imlist": DATABASE, "qimlist": QUERIES, "gnd": gnd})
    with pytest.raises(DataError, match="gnd_roxford5k.pkl: " + message):
        read_revisited(tmp_path, "roxford5k")


def test_missing_files_are_named(tmp_path):
    folder = make_revisited(tmp_path)
    (folder / "jpg" / "db_3.jpg").unlink()
    with pytest.raises(DataError, match=r"1 image files of .*gnd_roxford5k.pkl are missing.*db_3"):
        read_revisited(tmp_path, "roxford5k")
    with pytest.raises(DataError, match=r"gnd_rparis6k.pkl: ground-truth file not found"):
        read_revisited(tmp_path, "rparis6k")
    _write_gnd(folder, {"imlist": DATABASE, "gnd": GROUND_TRUTH})
    with pytest.raises(DataError, match=r"expected a dict with imlist, qimlist and gnd"):
        read_revisited(tmp_path, "roxford5k")


def test_a_query_is_its_box_of_the_image_and_shrunk_to_the_longer_side(tmp_path):
    """Query 0's box [8, 4, 56, 40] is the 48 x 36 pixels at columns 8..55, rows 4..39 (sliced
    here from the file's pixels); at longer side 24 it becomes 24 x 18 (LANCZOS), normalised."""
    make_revisited(tmp_path)
    release = read_revisited(tmp_path, "roxford5k")
    pixels = np.asarray(Image.open(release.queries[0]).convert("RGB"))
    box = pixels[4:40, 8:56]
    whole = RevisitedImages(release.queries, release.boxes, None)
    assert np.array_equal(np.asarray(whole.image(0)), box)
    shrunk = Image.fromarray(box).resize((24, 18), Image.Resampling.LANCZOS)
    expected = torch.from_numpy(np.asarray(shrunk, dtype=np.float32) / 255).permute(2, 0, 1)
    mean, std = (
        torch.tensor(IMAGENET_MEAN)[:, None, None],
        torch.tensor(IMAGENET_STD)[:, None, None],
    )
    tensor = RevisitedImages(release.queries, release.boxes, 24)[0]
    assert tensor.shape == (3, 18, 24)
    assert torch.allclose(tensor, (expected - mean) / std, atol=1e-6)
    database = RevisitedImages(release.database, None, 32)[0]  # whole: 64 x 48 -> 32 x 24
    assert database.shape == (3, 24, 32)


def test_the_stored_pixels_are_read_without_the_exif_rotation(tmp_path):
    """revisitop opens the files with PIL as stored: a box is in the stored pixels' frame, so
    an EXIF orientation (6: rotate for display) is not applied before the crop."""
    make_revisited(tmp_path)
    release = read_revisited(tmp_path, "roxford5k")
    path = release.queries[0]
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.open(path).save(path, exif=exif.tobytes())
    assert RevisitedImages(release.queries, None, None).image(0).size == (64, 48)
    path.write_bytes(b"not an image")
    with pytest.raises(DataError, match="query_a.jpg: cannot decode image"):
        RevisitedImages(release.queries, None, None).image(0)
