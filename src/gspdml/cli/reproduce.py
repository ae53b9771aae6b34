"""``gspdml reproduce TABLE [key.sub=value ...] [--rows ...] [--data-root DIR] [--dry-run]`` and
``gspdml reproduce --list`` (:mod:`gspdml.workflows.reproduce`): run a paper's table row by row
and print it beside the paper's numbers."""

from __future__ import annotations

import argparse
from pathlib import Path

from gspdml.errors import ConfigError


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from gspdml.workflows.reproduce import (
        dry_run,
        get_table,
        list_markdown,
        reproduce,
        table_markdown,
    )

    if args.list:
        print(list_markdown(), end="")
        return 0
    if args.table is None:
        raise ConfigError("table", "name a table (gspdml reproduce --list shows them)")
    table = get_table(args.table)
    options = dict(
        rows=args.rows,
        data_root=None if args.data_root is None else str(args.data_root),
        overrides=args.overrides,
        seeds=args.seeds,
        output_dir=None if args.output_dir is None else str(args.output_dir),
    )
    if args.dry_run:
        print(dry_run(table, **options), end="")
        return 0
    print(table_markdown(table, reproduce(table, **options)), end="")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce",
        help="run a table of the papers (GSP, XML, ...) and print it beside the published numbers",
        description="Run every row of a paper's table by its protocol (resumable: finished "
        "models are reused) and write <output-dir>/tables/TABLE.md and .json with the paper's "
        "number, ours, the difference and our std. Overrides key.sub=value apply to every row "
        "(e.g. schedule.max_steps=2 for a smoke run). The composed-retrieval tables (protocol "
        "cir) evaluate a frozen vision-language model instead and take the settings model=SPEC, "
        "weights, vocabulary, memory, device, batch_size, cache. The tables of released "
        "pre-trained models (protocol frozen: SimPool Table 3.9) evaluate the authors' "
        "checkpoints as they are and take checkpoints=DIR (the files under their published "
        "names) or checkpoint=PATH, device, batch_size, resize, crop.",
    )
    p.add_argument("table", nargs="?", default=None, help="table key (see --list)")
    p.add_argument(
        "overrides",
        nargs="*",
        help="overrides key.sub=value for every row (YAML values); a cir or frozen table: "
        "key=value settings",
    )
    p.add_argument("--list", action="store_true", help="list the tables with their row counts")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list the runs and the GPU-hour estimate; train nothing",
    )
    p.add_argument(
        "--rows",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="only these rows: shell patterns on <dataset>/<label> or on the preset (e.g. 'cub/*')",
    )
    p.add_argument(
        "--data-root",
        type=Path,
        default=None,
        help="folder holding the datasets in their official layouts (CUB_200_2011, cars196, "
        "Stanford_Online_Products, InShop); default: each preset's data/<name>. A cir table: "
        "the FreeDom release's data/ folder (imagenet_r, minidn, nico, ltll; PatternNet/ for "
        "WeiCom); default: data",
    )
    p.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="training seeds (default: the table's)"
    )
    p.add_argument(
        "--output-dir", type=Path, default=None, help="runs and tables go here (default: runs)"
    )
    p.set_defaults(func=_cmd_reproduce)
