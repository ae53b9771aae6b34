"""The ``gspdml`` command line.

    gspdml train CONFIG [key.sub=value ...] [--resume [--allow-changes]]
    gspdml evaluate RUN_DIR [--split test] [--weights final|best]
    gspdml config CONFIG [key.sub=value ...]        # print the resolved, validated config
    gspdml config --list                             # the shipped presets
    gspdml demo [CONFIG ...]                         # the main job: train and compare methods
    gspdml pretrain RECIPE [RECIPE ...]              # pre-train (or find cached) backbone weights
    gspdml protocol fair|tuning|conventional|two_stage CONFIG  # a whole evaluation protocol, resumable
    gspdml index|search|report|export ...            # retrieval (gspdml.retrieval.cli)
    gspdml cir freedom|weicom ...                    # composed image retrieval (gspdml.cir.cli)
    gspdml data fetch|verify ...                     # benchmark datasets (gspdml.data.cli)
    gspdml bundle RUN_DIR --out DIR                  # portable model bundle (gspdml.retrieval.bundle)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

from gspdml.errors import GspdmlError


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
        print("gspdml train: give a config file or a preset name (e.g. gspdml train demo-gsp); presets: gspdml config --list",
              file=sys.stderr)
        return 2
    config = load_config(args.config, args.overrides)
    if args.no_progress:
        config["trainer"]["progress"] = False
    try:
        results = train(config, args.run_dir, resume=args.resume, allow_changes=args.allow_changes)
    except TrainingInterrupted as stop:
        print(f"gspdml: {stop}; continue with:\n  {_resume_command(args)}", file=sys.stderr)
        return 130
    if os.environ.get("RANK", "0") == "0":  # one printout under torchrun
        print(json.dumps(results, indent=2))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from gspdml.data import build_data
    from gspdml.evaluation.splits import evaluate_split
    from gspdml.training import load_run

    config, model = load_run(args.run_dir, weights=args.weights)
    data = build_data(config["data"]["dataset"], seed=int(config["seed"]))
    split = getattr(data, args.split)
    if split is None:
        raise GspdmlError(f"dataset {config['data']['dataset']['name']!r} has no {args.split} split")
    metrics = evaluate_split(model, split, batch_size=config["data"]["eval_batch_size"], recall_at=config["evaluation"]["recall_at"],
                             progress=not args.no_progress)
    if config["evaluation"]["postprocess"]:
        from gspdml.evaluation.postprocess import postprocessed_split_metrics

        metrics["postprocessed"] = postprocessed_split_metrics(
            model, data, split, config["evaluation"]["postprocess"],
            batch_size=config["data"]["eval_batch_size"], recall_at=config["evaluation"]["recall_at"])
    print(json.dumps({"run": str(args.run_dir), "split": args.split, "weights": args.weights, **metrics}, indent=2))
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


def _cmd_demo(args: argparse.Namespace) -> int:
    from gspdml.demo import run_demo

    run_demo(args.configs, Path(args.output_dir), overrides=args.overrides, fresh=args.fresh)
    return 0


def _cmd_pretrain(args: argparse.Namespace) -> int:
    from gspdml.training.pretrain import pretrained_state, weights_path, load_recipe

    for recipe in args.recipes:
        _, record = pretrained_state(recipe)
        print(json.dumps({**record, "path": str(weights_path(load_recipe(recipe)))}, indent=2))
    return 0


def build_parser(extensions: Sequence[Callable[[argparse._SubParsersAction], None]] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gspdml", description="Deep metric learning with Generalized Sum Pooling.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train one run described by a YAML config")
    p.add_argument("config", nargs="?", help="YAML config file or preset name (gspdml config --list)")
    p.add_argument("overrides", nargs="*", help="overrides key.sub=value (values are YAML)")
    p.add_argument("--run-dir", type=Path, default=None, help="default: <output_dir>/<name>")
    p.add_argument("--resume", action="store_true", help="continue a stopped run from its last checkpoint (same config)")
    p.add_argument("--allow-changes", action="store_true",
                   help="with --resume: accept changed keys that do not affect the weights (logging, progress, "
                        "workers, device); config.yaml is updated")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (one line per evaluation still)")
    p.set_defaults(func=_cmd_train, parser=p)

    p = sub.add_parser("evaluate", help="re-evaluate a run's weights on a split")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--split", choices=("test", "val"), default="test")
    p.add_argument("--weights", choices=("final", "best"), default="final",
                   help="final: model.safetensors, written when training ends (the best validation round's weights "
                        "when evaluation.restore_best, else the last step's); best: checkpoints/best.safetensors, "
                        "the best round so far (readable while training runs)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("config", help="print the resolved, validated config (with the dataset's defaults)")
    p.add_argument("config", nargs="?", help="YAML config file or preset name")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--list", action="store_true", help="list the shipped presets")
    p.set_defaults(func=_cmd_config, parser=p)

    p = sub.add_parser("demo", help="train the demo methods on the embedded collage and print a table")
    p.add_argument("configs", nargs="*", help="config files or preset names (default: the demo-* presets)")
    p.add_argument("--output-dir", default="runs/demo")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="override for every run, key.sub=value")
    p.add_argument("--fresh", action="store_true", help="retrain runs that already exist")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("pretrain", help="pre-train backbone weights from a recipe (cached by content hash)")
    p.add_argument("recipes", nargs="+", help="recipe names (gspdml/presets/pretrain) or YAML files")
    p.set_defaults(func=_cmd_pretrain)

    for extend in extensions:
        extend(sub)
    return parser


def _extensions() -> list[Callable]:
    """Sub-commands contributed by other packages (each exposes ``add_parser(subparsers)``)."""
    from gspdml.cir.cli import add_parser as cir
    from gspdml.data.cli import add_parser as data
    from gspdml.retrieval.bundle import add_parser as bundle
    from gspdml.evaluation.protocol_runner import add_parser as protocol
    from gspdml.retrieval.cli import add_parser as retrieval

    return [protocol, retrieval, cir, data, bundle]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser(_extensions())
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
