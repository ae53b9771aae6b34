"""``gspdml tune CONFIG --space SPACE.yaml --trials N [overrides] [--seeds ...] [--output-dir DIR]``
(:mod:`gspdml.workflows.tuning_search`): an Optuna TPE search over the tuning protocol, resumable
(SQLite), the best trial written as a config. Needs the ``optuna`` extra."""

from __future__ import annotations

import argparse
from pathlib import Path

from gspdml.errors import ConfigError
from gspdml.output_files import json_text


def _cmd_tune(args: argparse.Namespace) -> int:
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ConfigError(
            "tune", "needs Optuna: pip install 'gspdml[optuna]' (or pip install optuna)"
        ) from None
    from gspdml.workflows.tuning_search import read_space, run_search

    result = run_search(
        args.config,
        read_space(args.space),
        trials=args.trials,
        overrides=args.overrides,
        seeds=args.seeds,
        output_dir=args.output_dir,
        sampler_seed=args.sampler_seed,
    )
    print(json_text(result, indent=2))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="hyper-parameter search (Optuna TPE) over the tuning protocol, resumable",
    )
    p.add_argument("config", help="YAML config file or preset (one model)")
    p.add_argument("overrides", nargs="*", help="overrides key.sub=value for every trial")
    p.add_argument("--space", type=Path, required=True, help="YAML search space (key: range)")
    p.add_argument(
        "--trials", type=int, required=True, help="complete trials the study should have"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds per trial")
    p.add_argument(
        "--output-dir", type=Path, default=None, help="default <output_dir>/<name>-search"
    )
    p.add_argument("--sampler-seed", type=int, default=0, help="seed of the TPE sampler")
    p.set_defaults(func=_cmd_tune)
