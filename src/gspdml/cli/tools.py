"""``gspdml data fetch|verify`` (:mod:`gspdml.data.fetch`, :mod:`gspdml.data.catalog`),
``bundle`` (:mod:`gspdml.retrieval.bundle`), ``check`` (the contract checks of a plugin's
components, :mod:`gspdml.workflows.contracts`; exit status 1 when one fails) and ``doctor`` (what
a bug report needs about this machine, :mod:`gspdml.workflows.doctor`)."""

from __future__ import annotations

import argparse

from gspdml.cli.binding import command
from gspdml.output_files import json_text
from gspdml.retrieval.bundle import FILES, write_bundle
from gspdml.training.run_dir import WEIGHT_FILES


def _cmd_fetch(args: argparse.Namespace) -> int:
    from gspdml.data.catalog import SOURCES
    from gspdml.data.fetch import fetch

    count = fetch(SOURCES[args.name], args.root, progress=not args.no_progress)
    print(f"{args.name}: {count} images verified in {args.root}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from gspdml.data.catalog import verify

    name, count = verify(args.root, args.dataset)
    print(f"{name}: {count} images, layout and official counts verified in {args.root}")
    return 0


def _cmd_bundle(args: argparse.Namespace) -> int:
    out = write_bundle(args.run_dir, args.out, args.weights, args.overwrite)
    print(f"wrote {out}: {', '.join(FILES)}")
    return 0


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


def _cmd_doctor(args: argparse.Namespace) -> int:
    from gspdml.workflows.doctor import doctor_report, format_report

    report = doctor_report()
    print(json_text(report, indent=2) if args.json else format_report(report))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``data``, ``bundle``, ``check`` and ``doctor``."""
    names = ("cub", "cars", "sop", "inshop")
    data = sub.add_parser("data", help="download and verify the benchmark datasets")
    actions = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    text = "download (resumable), check the checksums, extract and verify a dataset"
    add = command(actions, "fetch", _cmd_fetch, help=text)
    add("name", choices=names)
    add("--root", required=True, help="folder to put the dataset in")
    add("--no-progress", action="store_true", help="no progress bar")
    text = "check a dataset placed by hand: layout, official counts, every image present"
    add = command(actions, "verify", _cmd_verify, help=text)
    add("root", help="dataset folder")
    text = "which dataset (default: detected from the layout)"
    add("--dataset", choices=names, help=text)

    text = "write a portable model bundle (weights, config, preprocessing, model card)"
    add = command(sub, "bundle", _cmd_bundle, help=text)
    add("run_dir", help="run directory (config.yaml + model.safetensors)")
    text = "bundle folder to write (a hub-style repository layout)"
    add("--out", required=True, help=text)
    text = "final (default) or best"
    add("--weights", choices=tuple(WEIGHT_FILES), default="final", help=text)
    add("--overwrite", action="store_true", help="replace an existing bundle folder")

    text = "Import MODULE (on PYTHONPATH or installed) and check every pooling, loss and backbone it registers against the library's contracts (shapes, gradients, batch independence, declarations)."
    summary = "run the contract checks on the components a plugin module registers"
    add = command(sub, "check", _cmd_check, help=summary, description=text)
    add("module", help="the plugin module, e.g. my_poolings")

    text = "print versions, CPU/GPU capabilities and the precision 'auto' picks (for bug reports)"
    add = command(sub, "doctor", _cmd_doctor, help=text)
    add("--json", action="store_true", help="print the report as JSON")
