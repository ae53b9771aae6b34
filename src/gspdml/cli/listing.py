"""``gspdml list poolings|losses|backbones|datasets|presets|metrics [PATTERN] [--json]``: the
names a run config can use, with one line each (:mod:`gspdml.workflows.listing`); a metric's
line gives its depth (bounded, per-k, whole ranking) and cost class."""

from __future__ import annotations

import argparse
import json


def _cmd_list(args: argparse.Namespace) -> int:
    from gspdml.workflows.listing import listing

    rows = listing(args.kind, args.pattern)
    if args.json:
        print(json.dumps([{"name": name, "summary": summary} for name, summary in rows], indent=2))
        return 0
    width = max((len(name) for name, _ in rows), default=0)
    for name, summary in rows:
        print(f"{name:<{width}}  {summary}".rstrip())
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    from gspdml.workflows.listing import KINDS

    p = sub.add_parser(
        "list",
        help="list the poolings, losses, backbones, datasets, presets or metrics a config can name",
    )
    p.add_argument("kind", choices=KINDS)
    p.add_argument("pattern", nargs="?", help="shell-style filter on the names, e.g. 'gsp*'")
    p.add_argument("--json", action="store_true", help="print [{name, summary}] as JSON")
    p.set_defaults(func=_cmd_list)
