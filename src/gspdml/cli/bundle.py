"""``gspdml bundle RUN_DIR --out DIR [--weights final|best] [--overwrite]`` (:mod:`gspdml.retrieval.bundle`)."""

from __future__ import annotations

import argparse

from gspdml.retrieval.bundle import FILES, write_bundle
from gspdml.training.run_dir import WEIGHT_FILES


def _cmd_bundle(args: argparse.Namespace) -> int:
    out = write_bundle(args.run_dir, args.out, args.weights, args.overwrite)
    print(f"wrote {out}: {', '.join(FILES)}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "bundle", help="write a portable model bundle (weights, config, preprocessing, model card)"
    )
    parser.add_argument("run_dir", help="run directory (config.yaml + model.safetensors)")
    parser.add_argument(
        "--out", required=True, help="bundle folder to write (a hub-style repository layout)"
    )
    parser.add_argument(
        "--weights", choices=tuple(WEIGHT_FILES), default="final", help="final (default) or best"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing bundle folder"
    )
    parser.set_defaults(func=_cmd_bundle)
