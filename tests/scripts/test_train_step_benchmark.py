"""``benchmarks/train_step.py`` compares like with like: each side of a row trains exactly
``rounds x steps`` batches of the preset's size, across the sampler's epoch ends (the first
version stopped each gspdml pass at an epoch end and drew the plain side's batches from a sampler
already at its end, so a row's rates were computed for images that were never trained: 268,477
img/s on a CPU)."""

import argparse
import math

import torch

from tests.helpers.repo_scripts import load_script


def test_both_sides_train_every_counted_image_across_epoch_ends():
    bench = load_script("benchmarks/train_step.py")
    # 4 classes x 8 images: 4 batches of 2 x 4 per epoch; gspdml's warm-up pass and two rounds of
    # 3 steps cross two epoch ends, the plain side's 3 batches drawn after step 3 cross one
    args = argparse.Namespace(size=32, batch=8, steps=3, rounds=1, compile=False)
    row = bench.time_row("resnet50", "gap", args, "fp32", torch.device("cpu"))
    assert row["batch"] == 8
    assert row["images"] == {"gspdml": 3 * 8, "plain": 3 * 8}
    assert all(math.isfinite(row[side]) and row[side] > 0 for side in ("gspdml", "plain"))
