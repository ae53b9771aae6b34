"""``gspdml doctor [--json]``: what a bug report needs about this machine (:mod:`gspdml.workflows.doctor`)."""

from __future__ import annotations

import argparse

from gspdml.output_files import json_text


def _cmd_doctor(args: argparse.Namespace) -> int:
    from gspdml.workflows.doctor import doctor_report, format_report

    report = doctor_report()
    print(json_text(report, indent=2) if args.json else format_report(report))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="print versions, CPU/GPU capabilities and the precision 'auto' picks (for bug reports)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_doctor)
