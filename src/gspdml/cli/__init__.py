"""The ``gspdml`` command line: the parser and ``main``; each command group lives in its own
module of :data:`GROUPS` (``gspdml --help`` lists the commands). Only this package parses
arguments and prints; the library below it takes plain values and returns results."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, Optional

from gspdml.cli import cir, listing, retrieval, runs, tools, train
from gspdml.errors import GspdmlError
from gspdml.output_files import DISK_FULL, output_error

#: the command groups, in the order ``gspdml --help`` lists them; each has ``add_parser(subparsers)``
GROUPS = (train, runs, retrieval, cir, tools, listing)


class Parser(argparse.ArgumentParser):
    """Every ``gspdml`` parser: options are never abbreviated (``--resum`` is an error, not
    ``--resume``), so a typo cannot silently pick another option."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The ``gspdml`` parser with every sub-command; each sets ``func(args) -> exit status``."""
    parser = Parser(prog="gspdml", description="Deep metric learning with Generalized Sum Pooling.")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    for group in GROUPS:
        group.add_parser(sub)
    return parser


#: a ``key.sub=value`` override (or a ``key=value`` setting): a dotted name whose segments may
#: name list entries (``loss[1].margin``), ``=``, a value
OVERRIDE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[0-9]+\])*(\.[A-Za-z0-9_]+(\[[0-9]+\])*)*=")


def parse(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The arguments, with ``key.sub=value`` overrides accepted anywhere on the line (also after
    an option that takes several values, ``--seeds 0 1 trainer.progress=false``) for the
    commands that take overrides; any other unknown word is an error."""
    words = list(sys.argv[1:] if argv is None else argv)
    overrides = [w for w in words if OVERRIDE.match(w)]
    rest = [w for w in words if not OVERRIDE.match(w)]
    try:
        args, extra = parser.parse_known_args(rest)
    except SystemExit:
        if not overrides:
            raise
        args, extra = parser.parse_known_args(words)  # the command's own error, on its words
        overrides = []
    if overrides and not hasattr(args, "overrides"):
        args, extra = parser.parse_known_args(words)  # no overrides: the words as they were
        overrides = []
    overrides += [word for word in extra if "=" in word and not word.startswith("-")]
    unknown = [word for word in extra if word not in overrides]
    if overrides and not hasattr(args, "overrides"):
        unknown = extra
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if overrides:
        args.overrides = [*args.overrides, *overrides]
    return args


def _stderr_to_devnull_when_closed() -> None:
    """With stderr closed (``2>&-``) ``sys.stderr`` is None, prints to it reach stdout and the
    next file opened takes descriptor 2: descriptor 2 becomes ``/dev/null`` instead."""
    if sys.stderr is not None:
        return
    null = os.open(os.devnull, os.O_WRONLY)
    if null != 2:
        os.dup2(null, 2)
        os.close(null)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)


def main(argv: Optional[Sequence[str]] = None) -> int:
    _stderr_to_devnull_when_closed()
    parser = build_parser()
    args = parse(parser, argv)
    try:
        status: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return status
    except GspdmlError as exc:
        print(f"gspdml: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gspdml: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (gspdml search --json | head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        # a write path not wrapped in an OutputError: still an error naming the file, no traceback
        print(f"gspdml: error: {output_error(exc.filename or 'a file', exc)}", file=sys.stderr)
        return 2
