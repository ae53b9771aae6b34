"""A tiny revisited Oxford / Paris tree in the official layout (``<name>/jpg/<image>.jpg`` and
``<name>/gnd_<name>.pkl``), written with the standard pickle as the release is."""

import pickle
from pathlib import Path

from tests.helpers.datasets import write_image

#: 6 database images and 2 queries; query 0 has easy, hard and junk images, query 1 no easy one
DATABASE = [f"db_{i}" for i in range(6)]
QUERIES = ["query_a", "query_b"]
GROUND_TRUTH = [
    {"bbx": [8.0, 4.0, 56.0, 40.0], "easy": [1, 4], "hard": [2], "junk": [0]},
    {"bbx": [0.0, 0.0, 48.0, 48.0], "easy": [], "hard": [3, 5], "junk": [1]},
]
#: the image size (width, height): 64 x 48, landscape
SIZE = (64, 48)


def make_revisited(root, name="roxford5k", ground_truth=GROUND_TRUTH) -> Path:
    """Write the release ``name`` under ``root`` (random pixels, one seed per image) and
    return its folder."""
    folder = Path(root) / name
    for seed, image in enumerate([*DATABASE, *QUERIES]):
        write_image(folder / "jpg" / f"{image}.jpg", size=SIZE, seed=seed)
    gnd = {"imlist": list(DATABASE), "qimlist": list(QUERIES), "gnd": ground_truth}
    with open(folder / f"gnd_{name}.pkl", "wb") as file:
        pickle.dump(gnd, file)
    return folder
