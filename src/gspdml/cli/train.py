"""``gspdml train``, ``gspdml evaluate`` and ``gspdml config``: one run from a config
(:func:`gspdml.training.train`, :func:`gspdml.workflows.evaluate_run.evaluate_run`)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from pathlib import Path

from gspdml.cli.binding import call, command
from gspdml.errors import printable
from gspdml.output_files import json_text


def _resume_command(args: argparse.Namespace) -> str:
    """The command line that continues the run ``args`` started."""
    words = ["gspdml", "train", args.config, *args.overrides, "--resume"]
    words += ["--run-dir", str(args.run_dir)] if args.run_dir is not None else []
    words += ["--no-progress"] if args.no_progress else []
    return " ".join(shlex.quote(str(w)) for w in words)


def _cmd_train(args: argparse.Namespace) -> int:
    from gspdml.config import load_config
    from gspdml.training import train
    from gspdml.training.trainer import TrainingInterrupted

    if args.config is None:
        args.parser.print_usage(sys.stderr)
        text = "give a config file or a preset name (e.g. gspdml train demo-gsp); presets: gspdml config --list"
        print(f"gspdml train: {text}", file=sys.stderr)
        return 2
    config = load_config(args.config, args.overrides)
    if args.no_progress:
        trainer = dataclasses.replace(config.trainer, progress=False)
        config = dataclasses.replace(config, trainer=trainer)
    try:
        allow = {"allow_changes": args.allow_changes, "allow_data_change": args.allow_data_change}
        results = train(config, args.run_dir, resume=args.resume, **allow)
    except TrainingInterrupted as stop:
        print(f"gspdml: {stop}; continue with:\n  {_resume_command(args)}", file=sys.stderr)
        return 130
    if os.environ.get("RANK", "0") == "0":  # one printout under torchrun
        print(json_text(results, indent=2))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from gspdml.workflows.evaluate_run import evaluate_run

    def note(line: str) -> None:
        print(f"gspdml: {printable(line)}", file=sys.stderr)

    print(json_text(call(evaluate_run, args, note=note, progress=not args.no_progress), indent=2))
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    from gspdml.config import dump_config, load_config, preset_names

    if args.list:
        print("\n".join(preset_names()))
        return 0
    if args.config is None:
        args.parser.error("give a config file or a preset name (or --list)")
    print(dump_config(load_config(args.config, args.overrides)), end="")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``train``, ``evaluate`` and ``config``."""
    p = sub.add_parser("train", help="train one run described by a YAML config")
    add = p.add_argument
    add("config", nargs="?", help="YAML config file or preset name (gspdml config --list)")
    add("overrides", nargs="*", help="overrides key.sub=value (values are YAML)")
    add("--run-dir", type=Path, default=None, help="default: <output_dir>/<name>")
    text = "continue a stopped run from its last checkpoint (same config)"
    add("--resume", action="store_true", help=text)
    text = "with --resume: accept changed keys that do not affect the weights (logging, progress, workers, device); config.yaml is updated"
    add("--allow-changes", action="store_true", help=text)
    text = "with --resume: continue although the data differs from what the run started on (classes, files; data.json records it)"
    add("--allow-data-change", action="store_true", help=text)
    text = "no progress bar (one line per evaluation still)"
    add("--no-progress", action="store_true", help=text)
    p.set_defaults(func=_cmd_train, parser=p)

    text = "evaluate a run's weights on a split of its dataset or on labelled images"
    add = command(sub, "evaluate", _cmd_evaluate, help=text)
    add("run_dir", type=Path)
    text = "a split of the run's dataset (default: test)"
    add("--split", choices=("test", "val"), default=None, help=text)
    text = "a labelled folder of images (one sub-folder per class, as gspdml index reads it) or a CSV file with the columns path,label, evaluated leave-one-out"
    add("--images", help=text)
    add("--query", help="labelled query images (folder or CSV), with --gallery")
    add("--gallery", help="labelled gallery images (folder or CSV), with --query")
    text = "final: model.safetensors, written when training ends (the best validation round's weights when evaluation.restore_best, else the last step's); best: checkpoints/best.safetensors, the best round so far (readable while training runs)"
    add("--weights", choices=("final", "best"), default="final", help=text)
    text = "cpu, cuda, cuda:1, auto, ... (default: the run's trainer.device, which reproduces its results.json)"
    add("--device", help=text)
    text = "also compute these metrics (gspdml list metrics), e.g. mean_average_precision (whole ranking) or map_at_k (at each K of evaluation.recall_at); the output's 'metrics' lists what was computed and what was not"
    add("--metrics", nargs="+", metavar="NAME", help=text)
    add("--no-progress", action="store_true", help="no progress lines (stderr)")

    text = "print the resolved, validated config (with the dataset's defaults)"
    p = sub.add_parser("config", help=text)
    p.add_argument("config", nargs="?", help="YAML config file or preset name")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--list", action="store_true", help="list the shipped presets")
    p.set_defaults(func=_cmd_config, parser=p)
