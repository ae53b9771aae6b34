"""``gspdml compare RUN_OR_PROTOCOL... [--names ...] [--metrics ...] [--out PATH]``
(:mod:`gspdml.workflows.compare`): one table across methods with paired tests against the
first; printed as Markdown, and with ``--out`` written as ``PATH.md``, ``.tex``, ``.csv`` and
``.json``."""

from __future__ import annotations

import argparse
from pathlib import Path


def _cmd_compare(args: argparse.Namespace) -> int:
    from gspdml.workflows.compare import compare_folders, comparison_markdown, write_comparison

    result = compare_folders(args.folders, names=args.names, metrics=args.metrics)
    print(comparison_markdown(result), end="")
    if args.out is not None:
        for path in write_comparison(result, args.out):
            print(f"wrote {path}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="one table across methods (protocol or run folders), paired tests by (fold, seed)",
        description=(
            "Compare methods model by model: each FOLDER is a protocol folder, a run folder or "
            "a folder of runs; the first is the baseline. Paired by (fold, seed): mean "
            "difference with its 95%% confidence interval, paired t-test and Wilcoxon "
            "signed-rank p-values."
        ),
    )
    p.add_argument("folders", nargs="+", metavar="RUN_OR_PROTOCOL")
    p.add_argument("--names", nargs="+", default=None, help="method names (default: folder names)")
    p.add_argument(
        "--metrics",
        nargs="+",
        default=["precision_at_1", "map_at_r"],
        help="per-model metrics to compare (default precision_at_1 map_at_r)",
    )
    p.add_argument(
        "--out", type=Path, default=None, help="write PATH.md, PATH.tex, PATH.csv and PATH.json"
    )
    p.set_defaults(func=_cmd_compare)
