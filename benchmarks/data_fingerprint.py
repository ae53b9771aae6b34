"""The cost of a run's data fingerprint (``gspdml.training.data_fingerprint``) at the size of
Stanford Online Products, measured on generated files and extrapolated.

``--files`` files of SOP's mean size (its archive, 3,083,860,082 bytes, over its 120,053 images:
25,688 bytes; JPEG bytes do not compress, so the archive is about the images' total) are written
to a temporary folder, then the fingerprint's two passes over them are timed: ``files`` (every
name and size, ``os.stat``) and ``content`` (the sha256 of every file's bytes). The files were
just written, so they are read from the page cache: the numbers are the CPU's cost; from a cold
disk, add the time to read 3.08 GB. Time is the best of ``--repeats`` rounds, then scaled
linearly to 120,053 files (both passes are one step per file).

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/data_fingerprint.py [--files 4000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from gspdml.file_digest import _sha256
from gspdml.training.data_fingerprint import _files_digest, content_digest

SOP_IMAGES = 120_053
SOP_BYTES = 3_083_860_082


def best_of(repeats: int, work) -> float:
    times = []
    for _ in range(repeats):
        _sha256.cache_clear()  # every round hashes every file (no remembered hash)
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    size = SOP_BYTES // SOP_IMAGES
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i in range(args.files):
            path = Path(folder) / f"class{i // 6:05d}" / f"{i:06d}.JPG"
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(os.urandom(size))
            paths.append(str(path))
        names = best_of(args.repeats, lambda: _files_digest(paths))
        content = best_of(args.repeats, lambda: content_digest(paths))
    scale = SOP_IMAGES / args.files
    print(f"{args.files} files of {size:,} bytes ({args.files * size / 1e6:.0f} MB), page cache")
    print("| pass | measured (s) | per file (us) | SOP, 120,053 files (s) |")
    print("|---|---|---|---|")
    for name, seconds in (("files: names and sizes", names), ("content: sha256", content)):
        per_file = 1e6 * seconds / args.files
        print(f"| {name} | {seconds:.3f} | {per_file:.1f} | {seconds * scale:.1f} |")
    print(f"content hashing rate: {args.files * size / content / 1e9:.2f} GB/s")


if __name__ == "__main__":
    main()
