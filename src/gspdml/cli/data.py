"""``gspdml data fetch NAME --root DIR`` and ``gspdml data verify DIR`` (:mod:`gspdml.data.fetch`,
:mod:`gspdml.data.catalog`)."""

from __future__ import annotations

import argparse


def run_fetch(args: argparse.Namespace) -> int:
    from gspdml.data.catalog import SOURCES
    from gspdml.data.fetch import fetch

    count = fetch(SOURCES[args.name], args.root, progress=not args.no_progress)
    print(f"{args.name}: {count} images verified in {args.root}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from gspdml.data.catalog import verify

    name, count = verify(args.root, args.dataset)
    print(f"{name}: {count} images, layout and official counts verified in {args.root}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    names = ("cub", "cars", "sop", "inshop")
    data = subparsers.add_parser("data", help="download and verify the benchmark datasets")
    sub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    fetch = sub.add_parser(
        "fetch", help="download (resumable), check the checksums, extract and verify a dataset"
    )
    fetch.add_argument("name", choices=names)
    fetch.add_argument("--root", required=True, help="folder to put the dataset in")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    fetch.set_defaults(func=run_fetch)
    verify = sub.add_parser(
        "verify",
        help="check a dataset placed by hand: layout, official counts, every image present",
    )
    verify.add_argument("root", help="dataset folder")
    verify.add_argument(
        "--dataset", choices=names, help="which dataset (default: detected from the layout)"
    )
    verify.set_defaults(func=run_verify)
