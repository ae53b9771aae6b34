"""``gspdml index|search|report|export`` (:mod:`gspdml.retrieval`); the approximate-search options
are in :mod:`gspdml.cli.ann`, the post-processing of a search in :mod:`gspdml.cli.postprocess`."""

from __future__ import annotations

import argparse
import sys

from gspdml.cli import ann, postprocess
from gspdml.cli.binding import call
from gspdml.output_files import check_writable_file, json_text
from gspdml.retrieval import exact_search
from gspdml.retrieval.approximate import AnnRequest, search_approximate
from gspdml.retrieval.embedding import ON_ERROR
from gspdml.retrieval.export import FORMATS, TOLERANCE, export_run
from gspdml.retrieval.index_folder import embed_queries, write_index
from gspdml.retrieval.report import report_run
from gspdml.retrieval.sources import SPLITS


def _say(line: str) -> None:
    print(f"gspdml: {line}", file=sys.stderr)


def run_index(args: argparse.Namespace) -> int:
    progress, approximate = not args.no_progress, call(AnnRequest, args)
    written = call(write_index, args, note=_say, progress=progress, approximate=approximate)
    print("\n".join(written.lines()))
    return 0


def run_search(args: argparse.Namespace) -> int:
    if args.save:
        check_writable_file(args.save)
    found = embed_queries(args.index, args.queries, args.run, args.device, args.batch_size)
    index, queries, paths = found.index, found.queries, found.paths
    config, model, device = found.config, found.model, found.device
    k = min(args.k, len(index))
    results = postprocess.postprocessed_search(
        index, queries, k, paths, args, config, model, device
    )
    if results is None:
        knobs = {"exact": args.exact, "nprobe": args.nprobe, "ef": args.ef}
        approximate = search_approximate(index, args.index, queries, k, paths, **knobs)
        if approximate is None:
            results = index.search(queries, k, query_paths=paths, backend=args.backend)
        else:
            results, line = approximate
            print(line, file=sys.stderr if args.json else sys.stdout)
    if args.save:
        results.save(args.save)
    if args.json:
        print(json_text(results.rows(), indent=1))
    else:
        print(results.format_text())
    return 0


def run_report(args: argparse.Namespace) -> int:
    out, skipped = call(report_run, args, note=_say, progress=not args.no_progress)
    print(f"wrote {out}" + (f" ({len(skipped)} files skipped)" if skipped else ""))
    return 0


def run_export(args: argparse.Namespace) -> int:
    print(call(export_run, args, fmt=args.format, check=not args.no_check)[1])
    return 0


def _add_on_error(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--on-error",
        choices=ON_ERROR,
        default="raise",
        help="an image that cannot be decoded: raise (stop; an index keeps the images done before it) "
        "or skip (leave it out, named on stderr)",
    )


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-size", type=int, default=64, help="images per forward pass (default 64)"
    )
    parser.add_argument(
        "--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1, ..."
    )


def add_index_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "index", help="embed a folder of images (or a dataset split) into a search index"
    )
    parser.add_argument("run_dir", help="run directory (config.yaml + model.safetensors)")
    parser.add_argument(
        "images", nargs="?", help="folder of images; sub-folder names are the labels"
    )
    parser.add_argument("--out", required=True, help="index folder to write")
    parser.add_argument(
        "--split", choices=SPLITS, help="index a split of the run's dataset instead of a folder"
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="add the images not yet in the index, keep the others, drop those whose file is gone",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing index")
    parser.add_argument(
        "--metric",
        choices=exact_search.METRICS,
        default="euclidean",
        help="distance of the index (default euclidean)",
    )
    _add_on_error(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress lines (stderr)")
    _add_common(parser)
    ann.add_index_options(parser)
    parser.set_defaults(func=run_index)
    return parser


def add_search_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "search", help="rank the indexed images by distance to query images"
    )
    parser.add_argument("index", help="index folder written by 'gspdml index'")
    parser.add_argument("queries", nargs="+", metavar="QUERY_IMAGE", help="query image files")
    parser.add_argument("-k", type=int, default=10, help="results per query (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--save",
        metavar="FILE",
        help="also write the results (safetensors, read by gspdml.evaluation.RetrievalResults.load)",
    )
    parser.add_argument(
        "--run", help="run directory of the model (default: the one recorded in the index)"
    )
    parser.add_argument(
        "--backend",
        choices=("auto", *exact_search.BACKENDS),
        default="auto",
        help="auto = faiss when installed",
    )
    _add_common(parser)
    ann.add_search_options(parser)
    postprocess.add_search_options(parser)
    parser.set_defaults(func=run_search)
    return parser


def add_report_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("report", help="write a self-contained HTML report of a run")
    parser.add_argument(
        "run_dir",
        help="run directory (config.yaml, model.safetensors, metrics.jsonl, results.json)",
    )
    parser.add_argument(
        "--images",
        help="folder of labelled images for the retrieval grid (default: the run's test split)",
    )
    parser.add_argument(
        "--split",
        choices=SPLITS,
        help="split of the run's dataset for the retrieval grid (default test)",
    )
    parser.add_argument("--out", help="HTML file to write (default RUN_DIR/report.html)")
    parser.add_argument(
        "--queries", type=int, default=8, help="query rows in the retrieval grid (default 8)"
    )
    parser.add_argument(
        "--worst",
        type=int,
        default=8,
        help="rows of the worst queries (lowest MAP@R) with their neighbours (default 8)",
    )
    parser.add_argument("-k", type=int, default=5, help="results per query (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the query choice (default 0)")
    _add_on_error(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress lines (stderr)")
    _add_common(parser)
    parser.set_defaults(func=run_report)
    return parser


def add_export_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "export", help="export the embedder to TorchScript or ONNX, checked against PyTorch"
    )
    parser.add_argument("run_dir", help="run directory (config.yaml + model.safetensors)")
    parser.add_argument(
        "--format", required=True, choices=tuple(FORMATS), help="torchscript (.pt) or onnx (.onnx)"
    )
    parser.add_argument("--out", help="file to write (default RUN_DIR/export/embedder.pt|.onnx)")
    parser.add_argument(
        "--image-size",
        type=int,
        nargs=2,
        metavar=("H", "W"),
        help="input size when the eval transform does not fix it",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=TOLERANCE,
        help=f"largest allowed |difference| to PyTorch (default {TOLERANCE:g})",
    )
    parser.add_argument(
        "--no-check", action="store_true", help="skip the comparison with the PyTorch model"
    )
    parser.set_defaults(func=run_export)
    return parser


def add_parser(subparsers) -> None:
    """Register ``index``, ``search``, ``report`` and ``export`` on the ``gspdml`` sub-parsers."""
    add_index_parser(subparsers)
    add_search_parser(subparsers)
    add_report_parser(subparsers)
    add_export_parser(subparsers)
