"""``gspdml check MODULE``: import a plugin module and run the library's contract checks on
every pooling, loss and backbone it registers (:mod:`gspdml.workflows.contracts`); exit status
1 when one fails."""

from __future__ import annotations

import argparse


def _cmd_check(args: argparse.Namespace) -> int:
    from gspdml.workflows.contracts import components_of, run_checks

    failed = 0
    for result in run_checks(components_of(args.module)):
        mark = "ok  " if result.passed else "FAIL"
        line = f"{mark} {result.kind} {result.name!r}: {result.check}"
        print(line + ("" if result.passed else f": {result.message}"))
        failed += not result.passed
    print(f"{failed} failed" if failed else "all contract checks passed")
    return 1 if failed else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="run the contract checks on the components a plugin module registers",
        description="Import MODULE (on PYTHONPATH or installed) and check every pooling, loss "
        "and backbone it registers against the library's contracts (shapes, gradients, batch "
        "independence, declarations).",
    )
    p.add_argument("module", help="the plugin module, e.g. my_poolings")
    p.set_defaults(func=_cmd_check)
