"""The commands over many runs: ``gspdml demo`` (:mod:`gspdml.workflows.demo`), ``pretrain``
(:mod:`gspdml.cli.pretrain`), ``protocol`` (:mod:`gspdml.workflows.protocol`), ``tune``
(:mod:`gspdml.workflows.tuning_search`, the ``optuna`` extra), ``compare``
(:mod:`gspdml.workflows.compare`), ``diff`` (:mod:`gspdml.workflows.run_diff`) and ``reproduce``
(:mod:`gspdml.workflows.reproduce`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gspdml.cli import pretrain
from gspdml.cli.binding import call, command
from gspdml.errors import ConfigError, import_optional
from gspdml.output_files import json_text
from gspdml.workflows.compare import DEFAULT_METRICS
from gspdml.workflows.protocol import DEFAULT_SEEDS, PROTOCOLS


def _cmd_demo(args: argparse.Namespace) -> int:
    from gspdml.workflows.demo import run_demo

    run_demo(args.configs, Path(args.output_dir), overrides=args.overrides, fresh=args.fresh)
    return 0


def _cmd_protocol(args: argparse.Namespace) -> int:
    from gspdml.config import load_config
    from gspdml.workflows.protocol import run_protocol, table_columns
    from gspdml.workflows.tables import results_table_markdown

    config = load_config(args.config, args.overrides)
    result = run_protocol(config, args.protocol, seeds=args.seeds, output_dir=args.output_dir)
    columns = table_columns(args.protocol, config)
    print(results_table_markdown({config.name: result}, columns=columns), end="")
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    import_optional(
        "optuna", "tune", "needs Optuna: pip install 'gspdml[optuna]' (or pip install optuna)"
    )
    from gspdml.workflows.tuning_search import read_space, run_search

    result = call(run_search, args, config_source=args.config, space=read_space(args.space))
    print(json_text(result, indent=2))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from gspdml.workflows.compare import compare_folders, comparison_markdown, write_comparison

    result = compare_folders(args.folders, names=args.names, metrics=args.metrics)
    print(comparison_markdown(result), end="")
    for path in write_comparison(result, args.out) if args.out is not None else ():
        print(f"wrote {path}")
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    from gspdml.workflows.run_diff import diff_runs, diff_text

    result = diff_runs(args.run_a, args.run_b)
    print(json_text(result, indent=2, default=str) if args.json else diff_text(result), end="")
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from gspdml.workflows.reproduce import (
        dry_run,
        get_table,
        list_markdown,
        reproduce,
        table_markdown,
    )

    if args.list:
        print(list_markdown(), end="")
        return 0
    if args.table is None:
        raise ConfigError("table", "name a table (gspdml reproduce --list shows them)")
    table = get_table(args.table)
    options = dict(
        rows=args.rows,
        data_root=None if args.data_root is None else str(args.data_root),
        overrides=args.overrides,
        seeds=args.seeds,
        output_dir=None if args.output_dir is None else str(args.output_dir),
    )
    if args.dry_run:
        print(dry_run(table, **options), end="")
        return 0
    print(table_markdown(table, reproduce(table, **options)), end="")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``demo``, ``pretrain``, ``protocol``, ``tune``, ``compare``, ``diff`` and
    ``reproduce``."""
    text = "train the demo methods on the embedded collage and print a table"
    add = command(sub, "demo", _cmd_demo, help=text)
    add("configs", nargs="*", help="config files or preset names (default: the demo-* presets)")
    add("--output-dir", default="runs/demo")
    text = "override for every run, key.sub=value"
    add("--set", dest="overrides", action="append", default=[], help=text)
    add("--fresh", action="store_true", help="retrain runs that already exist")

    pretrain.add_parser(sub)

    text = "train and aggregate all models of an evaluation protocol"
    add = command(sub, "protocol", _cmd_protocol, help=text)
    add("protocol", choices=PROTOCOLS)
    add("config", help="YAML config file (one model)")
    add("overrides", nargs="*", help="overrides key.sub=value (values are YAML)")
    text = f"training seeds per model (default {' '.join(map(str, DEFAULT_SEEDS))})"
    add("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS), help=text)
    add("--output-dir", type=Path, default=None, help="default: <output_dir>/<name>")

    text = "hyper-parameter search (Optuna TPE) over the tuning protocol, resumable"
    add = command(sub, "tune", _cmd_tune, help=text)
    add("config", help="YAML config file or preset (one model)")
    add("overrides", nargs="*", help="overrides key.sub=value for every trial")
    add("--space", type=Path, required=True, help="YAML search space (key: range)")
    add("--trials", type=int, required=True, help="complete trials the study should have")
    add("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS), help="seeds per trial")
    add("--output-dir", type=Path, default=None, help="default <output_dir>/<name>-search")
    add("--sampler-seed", type=int, default=0, help="seed of the TPE sampler")

    text = "Compare methods model by model: each FOLDER is a protocol folder, a run folder or a folder of runs; the first is the baseline. Paired by (fold, seed): mean difference with its 95%% confidence interval, paired t-test and Wilcoxon signed-rank p-values."
    summary = "one table across methods (protocol or run folders), paired tests by (fold, seed)"
    add = command(sub, "compare", _cmd_compare, help=summary, description=text)
    add("folders", nargs="+", metavar="RUN_OR_PROTOCOL")
    add("--names", nargs="+", default=None, help="method names (default: folder names)")
    text = "per-model metrics to compare (default precision_at_1 map_at_r)"
    add("--metrics", nargs="+", default=list(DEFAULT_METRICS), help=text)
    text = "write PATH.md, PATH.tex, PATH.csv and PATH.json"
    add("--out", type=Path, default=None, help=text)

    text = "what differs between two runs (config, defaults, environment, data, metrics)"
    add = command(sub, "diff", _cmd_diff, help=text)
    add("run_a")
    add("run_b")
    add("--json", action="store_true", help="the differences as JSON")

    text = "Run every row of a paper's table by its protocol (resumable: finished models are reused) and write <output-dir>/tables/TABLE.md and .json with the paper's number, ours, the difference and our std. Overrides key.sub=value apply to every row (e.g. schedule.max_steps=2 for a smoke run). The composed-retrieval tables (protocol cir) evaluate a frozen vision-language model instead and take the settings model=SPEC, weights, vocabulary, memory, device, batch_size, cache. The tables of released pre-trained models (protocol frozen: SimPool Table 3.9) evaluate the authors' checkpoints as they are and take checkpoints=DIR (the files under their published names) or checkpoint=PATH, device, batch_size, resize, crop. The supervised classification tables (protocol classify: SimPool Tables 3.4 and 3.12) train one classifier per row and take checkpoints=DIR or checkpoint=PATH (fine-tuning rows), device, workers, and epochs, batch_size, resize, crop in place of the row's. The ImageNet tables of released models (protocol probe: SimPool Tables 3.2 and 3.3) classify frozen features (weighted k-NN, linear probe, the released classifier) and take the frozen settings and fraction, knn_k, knn_temperature, probe_epochs, probe_lr, probe_batch_size."
    summary = "run a table of the papers (GSP, XML, ...) and print it beside the published numbers"
    add = command(sub, "reproduce", _cmd_reproduce, help=summary, description=text)
    add("table", nargs="?", default=None, help="table key (see --list)")
    text = "overrides key.sub=value for every row (YAML values); a cir, frozen, probe or classify table: key=value settings"
    add("overrides", nargs="*", help=text)
    add("--list", action="store_true", help="list the tables with their row counts")
    text = "list the runs and the GPU-hour estimate; train nothing"
    add("--dry-run", action="store_true", help=text)
    text = "only these rows: shell patterns on <dataset>/<label> or on the preset (e.g. 'cub/*')"
    add("--rows", nargs="+", default=[], metavar="PATTERN", help=text)
    text = "folder holding the datasets in their official layouts (CUB_200_2011, cars196, Stanford_Online_Products, InShop); default: each preset's data/<name>. A cir table: the FreeDom release's data/ folder (imagenet_r, minidn, nico, ltll; PatternNet/ for WeiCom); default: data. A classify or probe table: ImageNet-1k as DIR/imagenet (train/, val/)"
    add("--data-root", type=Path, default=None, help=text)
    add("--seeds", type=int, nargs="+", default=None, help="training seeds (default: the table's)")
    text = "runs and tables go here (default: runs)"
    add("--output-dir", type=Path, default=None, help=text)
