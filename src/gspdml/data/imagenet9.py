"""ImageNet-9 and its background variations, the test sets of the backgrounds challenge (Xiao et
al., "Noise or Signal: The Role of Image Backgrounds in Object Recognition", ICLR 2021, §2),
in the layout of its release (``backgrounds_challenge_data.tar.gz``)::

    <root>/[bg_challenge/]<variation>/val/<NN_name>/<image>      NN_name: 00_dog .. 08_fish

The variations and the columns of Psomas thesis Table 3.7: ``only_fg`` (OF), ``mixed_same``
(MS), ``mixed_rand`` (MR), ``mixed_next`` (MN), ``no_fg`` (NF), ``only_bg_b`` (OBB),
``only_bg_t`` (OBT) and ``original`` (IN-9). The class of an image is its folder's place in the
sorted folders (the challenge reads them with torchvision's ``ImageFolder``), which must be the
folder's number. An ImageNet-1k classifier is scored on them by mapping its top-1 ImageNet class
to one of the 9 (:data:`IN_TO_IN9`, the challenge's ``in_to_in9.json``; a class outside the 9
is wrong).
"""

from __future__ import annotations

from pathlib import Path

from gspdml.data.images import is_hidden, list_images
from gspdml.errors import DataError

SOURCE = "ImageNet-9"
#: Table 3.7's column -> the release's folder
VARIATIONS = {
    "OF": "only_fg",
    "MS": "mixed_same",
    "MR": "mixed_rand",
    "MN": "mixed_next",
    "NF": "no_fg",
    "OBB": "only_bg_b",
    "OBT": "only_bg_t",
    "IN-9": "original",
}
#: the 9 classes in the release's order
CLASSES = (
    "dog",
    "bird",
    "wheeled vehicle",
    "reptile",
    "carnivore",
    "insect",
    "musical instrument",
    "primate",
    "fish",
)
_RANGES: dict[int, tuple[tuple[int, int], ...]] = {
    0: ((151, 170), (173, 268)),
    1: ((7, 24), (87, 100), (127, 146)),
    3: ((33, 68),),
    4: ((269, 280), (286, 299), (356, 362), (387, 388)),
    5: ((300, 326),),
    7: ((365, 384),),
    8: ((0, 6), (389, 397)),
}
_SINGLE = {
    2: (407, 408, 428, 436, 444, 468, 511, 547, 555, 561, 565, 569, 573, 586, 603, 609, 612)
    + (627, 656, 661, 665, 670, 671, 675, 690, 705, 717, 734, 751, 757, 791, 802, 803, 817)
    + (820, 829, 847, 864, 866, 867, 870, 880),
    6: (401, 402, 420, 432, 486, 494, 513, 541, 546, 558, 566, 577, 579, 593, 594, 641, 642)
    + (683, 684, 687, 699, 776, 822, 875, 881, 889),
}


def _in_to_in9() -> tuple[int, ...]:
    mapping = [-1] * 1000
    for target, ranges in _RANGES.items():
        for low, high in ranges:
            mapping[low : high + 1] = [target] * (high + 1 - low)
    for target, classes in _SINGLE.items():
        for cls in classes:
            mapping[cls] = target
    return tuple(mapping)


#: ImageNet-1k class index -> its ImageNet-9 class, -1 for the 630 classes outside the 9
IN_TO_IN9 = _in_to_in9()


def read_imagenet9(root: str, variation: str) -> list[tuple[Path, int]]:
    """The images of ``variation`` (a folder name of :data:`VARIATIONS`) with their class
    (module doc), sorted by class and path."""
    if variation not in VARIATIONS.values():
        raise DataError(
            f"{SOURCE}: unknown variation {variation!r}; one of {list(VARIATIONS.values())}"
        )
    base = Path(root).expanduser()
    base = base / "bg_challenge" if (base / "bg_challenge").is_dir() else base
    folder = base / variation / "val"
    if not folder.is_dir():
        raise DataError(f"{SOURCE}: missing folder {folder} (the release's {variation}/val)")
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir() and not is_hidden(p.name))
    items = []
    for label, name in enumerate(classes):
        if not name[:2].isdigit() or int(name[:2]) != label or label >= len(CLASSES):
            raise DataError(
                f"{folder / name}: class folder {label + 1} of {len(classes)} must be named "
                f"{label:02d}_<name> for one of the 9 classes (00_dog .. 08_fish)"
            )
        images, _ = list_images(folder / name)
        items += [(path, label) for path in sorted(images)]
    if len(classes) != len(CLASSES):
        raise DataError(f"{folder}: {len(classes)} class folders, expected {len(CLASSES)}")
    return items
