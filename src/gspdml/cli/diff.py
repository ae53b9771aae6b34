"""``gspdml diff RUN_A RUN_B [--json]`` (:mod:`gspdml.workflows.run_diff`): what differs between
two runs: config, components' resolved options, environment, data and test metrics."""

from __future__ import annotations

import argparse

from gspdml.output_files import json_text


def _cmd_diff(args: argparse.Namespace) -> int:
    from gspdml.workflows.run_diff import diff_runs, diff_text

    result = diff_runs(args.run_a, args.run_b)
    if args.json:
        print(json_text(result, indent=2, default=str))
    else:
        print(diff_text(result), end="")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff", help="what differs between two runs (config, defaults, environment, data, metrics)"
    )
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--json", action="store_true", help="the differences as JSON")
    p.set_defaults(func=_cmd_diff)
