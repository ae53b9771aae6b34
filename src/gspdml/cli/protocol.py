"""``gspdml protocol fair|tuning|conventional|two_stage|split CONFIG [overrides] [--seeds ...] [--output-dir DIR]``
(:mod:`gspdml.workflows.protocol`): train and aggregate every model of an evaluation protocol,
then print its table (the columns of its results.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gspdml.workflows.protocol import PROTOCOLS, run_protocol, table_columns
from gspdml.workflows.tables import results_table_markdown


def _cmd_protocol(args: argparse.Namespace) -> int:
    from gspdml.config import load_config

    config = load_config(args.config, args.overrides)
    result = run_protocol(config, args.protocol, seeds=args.seeds, output_dir=args.output_dir)
    print(
        results_table_markdown({config.name: result}, columns=table_columns(args.protocol, config)),
        end="",
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("protocol", help="train and aggregate all models of an evaluation protocol")
    p.add_argument("protocol", choices=PROTOCOLS)
    p.add_argument("config", help="YAML config file (one model)")
    p.add_argument("overrides", nargs="*", help="overrides key.sub=value (values are YAML)")
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=[0, 1, 2],
        help="training seeds per model (default 0 1 2)",
    )
    p.add_argument("--output-dir", type=Path, default=None, help="default: <output_dir>/<name>")
    p.set_defaults(func=_cmd_protocol)
