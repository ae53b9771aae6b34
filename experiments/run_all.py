"""Run every experiment script ``experiments/*/run.py`` one after the other.

    python experiments/run_all.py [--smoke] [--out DIR] [--only NAME ...] [--threads N]

Each script runs in its own process (``python experiments/NAME/run.py [--smoke] --out
DIR/NAME``); ``--out`` defaults to ``runs/experiments``. A failing script is reported and the
others still run; the exit status is 1 when any failed. Prints the wall time of each script.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover(root: Path = HERE) -> dict[str, Path]:
    """``{name: path}`` of every ``root/<name>/run.py``, sorted by name."""
    return {path.parent.name: path for path in sorted(root.glob("*/run.py"))}


def command(script: Path, out: Path, smoke: bool, threads: int | None) -> list[str]:
    """The command line that runs one experiment script."""
    args = [sys.executable, str(script), "--out", str(out / script.parent.name)]
    if smoke:
        args.append("--smoke")
    if threads is not None:
        args += ["--threads", str(threads)]
    return args


def main(argv=None) -> int:
    scripts = discover()
    parser = argparse.ArgumentParser(
        prog="experiments/run_all.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--smoke", action="store_true", help="pass --smoke to every script")
    parser.add_argument(
        "--out",
        type=Path,
        default=HERE.parent / "runs" / "experiments",
        help="parent output directory",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=sorted(scripts),
        help="run only these experiments",
    )
    parser.add_argument("--threads", type=int, default=None, help="pass --threads to every script")
    args = parser.parse_args(argv)
    failed, times = [], {}
    for name in args.only or scripts:
        print(f"=== {name}", flush=True)
        start = time.perf_counter()
        status = subprocess.call(command(scripts[name], args.out, args.smoke, args.threads))
        times[name] = time.perf_counter() - start
        if status:
            failed.append(name)
            print(f"=== {name} FAILED (exit status {status})", flush=True)
    print(
        "\n"
        + "\n".join(
            f"{name:28s} {seconds:7.1f} s{'  FAILED' if name in failed else ''}"
            for name, seconds in times.items()
        )
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
