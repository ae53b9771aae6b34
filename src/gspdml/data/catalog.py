"""Where the four benchmark datasets come from, and how a placed copy is verified.

Digests: MD5 as published with the archives' download code; SHA-256 and sizes as TensorFlow
Datasets publishes them (see :mod:`gspdml.data.fetch`). Counts: the official totals the readers
check (their ``EXPECTED``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gspdml.data import cars, cub, inshop, sop
from gspdml.data.cars import read_cars
from gspdml.data.cub import read_cub
from gspdml.data.fetch import Archive, DatasetSource
from gspdml.data.image_splits import OfficialSplits
from gspdml.data.inshop import read_inshop
from gspdml.data.sop import read_sop
from gspdml.errors import DataError


def listed_images(reader: Callable[[str], OfficialSplits], official: int) -> Callable[[Path], int]:
    """A check: the reader accepts the folder (layout, split counts), it lists the ``official``
    number of images and every one of them exists; returns that number."""

    def check(folder: Path) -> int:
        splits = reader(str(folder))
        paths = [p for part in splits.parts for p in part.paths]
        if len(paths) != official:
            raise DataError(
                f"{folder}: the dataset lists {len(paths)} images; the official dataset has {official}"
            )
        missing = [p for p in paths if not Path(p).is_file()]
        if missing:
            raise DataError(
                f"{folder}: {len(missing)} of the {len(paths)} listed images are missing, e.g. {missing[0]}"
            )
        return len(paths)

    return check


CARS_MANUAL = """\
The Stanford URLs of Cars196 are dead (torchvision issue #7545). Either
  1. obtain car_ims.tgz (MD5 d5c8f0aa497503f355e17dc7886c3f14) and cars_annos.mat
     (MD5 b407c6086d669747186bd1d764ff9dbc), e.g. from a mirror you trust, put both in ROOT and run
     'gspdml data fetch cars --root ROOT' again (they are checked and extracted), or
  2. the same with the devkit release: cars_train.tgz, cars_test.tgz, car_devkit.tgz and
     cars_test_annos_withlabels.mat (SHA-256 pinned), or
  3. unpack the Kaggle 'stanford-car-dataset-by-classes-folder' copy into ROOT
     (ROOT/car_data/car_data/{train,test}/<class>/, with names.csv) and run
     'gspdml data verify ROOT --dataset cars'.
Every layout is read as it is (gspdml.data.cars); nothing has to be converted."""

#: Cars196's devkit release (torchvision's and TensorFlow Datasets' layout); digests and sizes as
#: TensorFlow Datasets publishes them (url_checksums/cars196)
CARS_DEVKIT = (
    Archive(
        "cars_train.tgz",
        sha256="512b227b30e2f0a8aab9e09485786ab4479582073a144998da74d64b801fd288",
        size=979269282,
    ),
    Archive(
        "cars_test.tgz",
        sha256="bffea656d6f425cba3c91c6d83336e4c5f86c6cffd8975b0f375d3a10da8e243",
        size=977350468,
    ),
    Archive(
        "car_devkit.tgz",
        sha256="b97deb463af7d58b6bfaa18b2a4de9829f0f79e8ce663dfa9261bf7810e9accd",
        size=330960,
    ),
    Archive(
        "cars_test_annos_withlabels.mat",
        sha256="790f75be8ea34eeded134cc559332baf23e30e91367e9ddca97d26ed9b895f05",
        size=185758,
        extract=False,
    ),
)

INSHOP_MANUAL = """\
In-Shop Clothes Retrieval (DeepFashion) is distributed on Google Drive after accepting its
licence: https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html
  1. download Img/img.zip and Eval/list_eval_partition.txt;
  2. unzip img.zip into ROOT/Img/ (giving ROOT/Img/img/...) and put list_eval_partition.txt in ROOT/Eval/;
  3. run 'gspdml data verify ROOT --dataset inshop'."""

SOURCES = {
    "cub": DatasetSource(
        "cub",
        (
            Archive(
                "CUB_200_2011.tgz",
                "97eceeb196236b17998738112f37df78",
                "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1",
                sha256="0c685df5597a8b24909f6a7c9db6d11e008733779a671760afef78feb49bf081",
                size=1150585339,
            ),
        ),
        listed_images(read_cub, cub.EXPECTED["images"]),
    ),
    "sop": DatasetSource(
        "sop",
        (
            Archive(
                "Stanford_Online_Products.zip",
                "7f73d41a2f44250d4779881525aea32e",
                "http://ftp.cs.stanford.edu/cs/cvgl/Stanford_Online_Products.zip",
                sha256="b04fa78210e69fab050ce73939550e1cd0f96890bdd98ec9fee732c3b756ef48",
                size=3083860082,
            ),
        ),
        listed_images(read_sop, sop.EXPECTED["images"]),
    ),
    "cars": DatasetSource(
        "cars",
        (
            Archive("car_ims.tgz", "d5c8f0aa497503f355e17dc7886c3f14"),
            Archive("cars_annos.mat", "b407c6086d669747186bd1d764ff9dbc", extract=False),
        ),
        listed_images(read_cars, cars.EXPECTED["images"]),
        CARS_MANUAL,
        alternatives=(CARS_DEVKIT,),
    ),
    "inshop": DatasetSource(
        "inshop", (), listed_images(read_inshop, inshop.EXPECTED["images"]), INSHOP_MANUAL
    ),
}


def detect(root: Path) -> str:
    """The dataset whose marker file is under ``root``."""
    markers = {
        "cub": ("images.txt", "CUB_200_2011/images.txt"),
        "sop": ("Ebay_train.txt", "Stanford_Online_Products/Ebay_train.txt"),
        "cars": ("cars_annos.mat", "devkit/cars_train_annos.mat", "car_data", "train"),
        "inshop": ("Eval/list_eval_partition.txt", "list_eval_partition.txt"),
    }
    found = [name for name, files in markers.items() if any((root / f).exists() for f in files)]
    if len(found) != 1:
        raise DataError(
            f"{root}: {'cannot tell which dataset this is' if not found else 'looks like ' + ' and '.join(found)}; "
            f"pass --dataset ({', '.join(SOURCES)})"
        )
    return found[0]


def verify(root: str | Path, name: str | None = None) -> tuple[str, int]:
    """``(dataset, images)`` of a dataset placed under ``root``; DataError naming what is wrong."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DataError(f"{root}: not a directory")
    name = name or detect(root)
    return name, SOURCES[name].check(root)
