"""The ``gspdml`` command line: the parser and ``main``; each command group lives in its own module.

    gspdml train CONFIG [key.sub=value ...] [--resume [--allow-changes]]   (cli.train)
    gspdml evaluate RUN_DIR [--split test] [--weights final|best]          (cli.train)
    gspdml config CONFIG [key.sub=value ...]        # print the resolved, validated config
    gspdml config --list                             # the shipped presets
    gspdml demo [CONFIG ...]                         # the main job: train and compare methods (cli.demo)
    gspdml pretrain RECIPE [RECIPE ...]              # pre-train (or find cached) backbone weights (cli.pretrain)
    gspdml protocol fair|tuning|conventional|two_stage CONFIG  # a whole evaluation protocol, resumable (cli.protocol)
    gspdml tune CONFIG --space SPACE.yaml --trials N    # Optuna TPE over the tuning protocol (cli.tune)
    gspdml compare RUN_OR_PROTOCOL ... [--out PATH]  # methods side by side, paired tests (cli.compare)
    gspdml diff RUN_A RUN_B [--json]                 # what differs between two runs (cli.diff)
    gspdml reproduce TABLE [--rows ...] [--dry-run] | --list  # a paper's table beside the paper (cli.reproduce)
    gspdml index|search|report|export ...            # retrieval (cli.retrieval, cli.ann, cli.postprocess)
    gspdml cir freedom|weicom ...                    # composed image retrieval (cli.cir)
    gspdml data fetch|verify ...                     # benchmark datasets (cli.data)
    gspdml bundle RUN_DIR --out DIR                  # portable model bundle (cli.bundle)
    gspdml check PLUGIN_MODULE                       # contract checks of a plugin's components (cli.check)
    gspdml doctor [--json]                           # versions, CPU/GPU, precision auto (cli.doctor)
    gspdml list poolings|losses|backbones|datasets|presets [PATTERN]  # what a config can name (cli.listing)

Only this package parses arguments; the domain modules below it take plain values.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any, Optional, Sequence

from gspdml.cli import (
    bundle,
    check,
    cir,
    compare,
    data,
    demo,
    diff,
    doctor,
    listing,
    pretrain,
    protocol,
    reproduce,
    retrieval,
    train,
    tune,
)
from gspdml.errors import GspdmlError
from gspdml.output_files import DISK_FULL, output_error

#: the command groups, in the order ``gspdml --help`` lists them; each has ``add_parser(subparsers)``
GROUPS = (
    train,
    demo,
    pretrain,
    protocol,
    tune,
    compare,
    diff,
    reproduce,
    retrieval,
    cir,
    data,
    bundle,
    check,
    doctor,
    listing,
)


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


#: a ``key.sub=value`` override (or a ``key=value`` setting): a dotted name, ``=``, a value
OVERRIDE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*=")


def parse(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The arguments, with ``key.sub=value`` overrides accepted anywhere on the line (also after
    an option, ``gspdml train demo-gsp --no-progress model.pooling.mu=0.2``, and after an option
    that takes several values, ``--seeds 0 1 trainer.progress=false``) for the commands that
    take overrides; any other unknown word is an error, as argparse reports it."""
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
    """With stderr closed (``gspdml ... 2>&-``) Python's ``sys.stderr`` is None, and
    ``print(..., file=sys.stderr)`` writes to stdout (breaking ``--json`` output) while the next
    file opened takes descriptor 2: descriptor 2 becomes ``/dev/null`` instead, so messages go
    nowhere and no file is written by a stray write to stderr."""
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
        status = args.func(args)
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
