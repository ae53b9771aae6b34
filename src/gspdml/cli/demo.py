"""``gspdml demo [CONFIG ...] [--output-dir DIR] [--set key=value] [--fresh]`` (:mod:`gspdml.workflows.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gspdml.workflows.demo import run_demo


def _cmd_demo(args: argparse.Namespace) -> int:
    run_demo(args.configs, Path(args.output_dir), overrides=args.overrides, fresh=args.fresh)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="train the demo methods on the embedded collage and print a table"
    )
    p.add_argument(
        "configs", nargs="*", help="config files or preset names (default: the demo-* presets)"
    )
    p.add_argument("--output-dir", default="runs/demo")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="override for every run, key.sub=value",
    )
    p.add_argument("--fresh", action="store_true", help="retrain runs that already exist")
    p.set_defaults(func=_cmd_demo)
