"""``gspdml list poolings|losses|backbones|datasets|postprocessors|presets|metrics [PATTERN] [--options]
[--json]``: the names a run config can use, with one line each (:mod:`gspdml.workflows.listing`);
a metric's line gives its depth (bounded, per-k, whole ranking) and cost class; ``--options``
adds each component's options with their type, default and meaning."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TYPE_CHECKING

from gspdml.cli.binding import command

if TYPE_CHECKING:
    from gspdml.config.options import ComponentOption


def _cmd_list(args: argparse.Namespace) -> int:
    from gspdml.workflows.listing import listing, option_listing

    if args.options:
        return _print_options(option_listing(args.kind, args.pattern), args.json)
    rows = listing(args.kind, args.pattern)
    if args.json:
        print(json.dumps([{"name": name, "summary": summary} for name, summary in rows], indent=2))
        return 0
    width = max((len(name) for name, _ in rows), default=0)
    for name, summary in rows:
        print(f"{name:<{width}}  {summary}".rstrip())
    return 0


def _print_options(rows: list[tuple[str, str, list[ComponentOption]]], as_json: bool) -> int:
    if as_json:
        listed = [
            {
                "name": name,
                "summary": summary,
                "options": [dataclasses.asdict(option) for option in options],
            }
            for name, summary, options in rows
        ]
        print(json.dumps(listed, indent=2))
        return 0
    for name, summary, options in rows:
        print(f"{name}  {summary}".rstrip())
        for option in options:
            line = f"    {option.name}: {option.kind}, default {option.default}. {option.doc}"
            print(line.rstrip())
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from gspdml.workflows.listing import KINDS

    text = "list the poolings, losses, backbones, datasets, post-processors, presets or metrics a config can name"
    add = command(sub, "list", _cmd_list, help=text)
    add("kind", choices=KINDS)
    add("pattern", nargs="?", help="shell-style filter on the names, e.g. 'gsp*'")
    text = "with each component, its options: type, default and meaning"
    add("--options", action="store_true", help=text)
    add("--json", action="store_true", help="print [{name, summary}] as JSON")
