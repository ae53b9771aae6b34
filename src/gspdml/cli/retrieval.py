"""``gspdml index|search|report|export`` (:mod:`gspdml.retrieval`); the post-processing options
of a search are in :mod:`gspdml.cli.postprocess`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from gspdml.cli import postprocess
from gspdml.cli.binding import call, command
from gspdml.output_files import check_writable_file, json_text
from gspdml.retrieval import ann, exact_search
from gspdml.retrieval.approximate import AnnRequest, search_approximate
from gspdml.retrieval.embedding import ON_ERROR
from gspdml.retrieval.export import FORMATS, TOLERANCE, export_run
from gspdml.retrieval.index import EXACT
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


def _add_common(add: Callable[..., Any], on_error: bool = True) -> None:
    if on_error:
        add(
            "--on-error",
            choices=ON_ERROR,
            default="raise",
            help="an image that cannot be decoded: raise (stop; an index keeps the images done "
            "before it) or skip (leave it out, named on stderr)",
        )
        add("--no-progress", action="store_true", help="no progress lines (stderr)")
    add("--batch-size", type=int, default=64, help="images per forward pass (default 64)")
    add("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1, ...")


def _add_knobs(add: Callable[..., Any]) -> None:
    add(
        "--nprobe",
        type=int,
        help="ivf/ivfpq: cells scanned per query (more: slower, higher recall)",
    )
    add("--ef", type=int, help="hnsw: candidates explored per query (more: slower, higher recall)")


def _add_index(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "embed a folder of images (or a dataset split) into a search index"
    parser = sub.add_parser("index", help=text)
    parser.set_defaults(func=run_index)
    add = parser.add_argument
    add("run_dir", help="run directory (config.yaml + model.safetensors)")
    add("images", nargs="?", help="folder of images; sub-folder names are the labels")
    add("--out", required=True, help="index folder to write")
    add("--split", choices=SPLITS, help="index a split of the run's dataset instead of a folder")
    text = "add the images not yet in the index, keep the others, drop those whose file is gone"
    add("--append", action="store_true", help=text)
    add("--overwrite", action="store_true", help="replace an existing index")
    text = "distance of the index (default euclidean)"
    add("--metric", choices=exact_search.METRICS, default="euclidean", help=text)
    _add_common(add)
    add = parser.add_argument_group("approximate search").add_argument
    text = "also build a faiss index: ivf, ivfpq or hnsw (default: exact only; with --append: the index's own)"
    add("--backend", choices=(EXACT, *ann.BACKENDS), default=None, help=text)
    add("--nlist", type=int, help="ivf/ivfpq: number of cells (default ~4 sqrt(N))")
    given = AnnRequest  # the settings' defaults live in one place
    text = "ivf/ivfpq: k-means training vectors per cell (default %(default)s)"
    add("--train-per-list", type=int, default=given.train_per_list, help=text)
    text = "ivf/ivfpq: k-means iterations (default %(default)s)"
    add("--kmeans-iters", type=int, default=given.kmeans_iters, help=text)
    add("--pq-m", type=int, help="ivfpq: bytes per vector (default dim / 4)")
    add("--hnsw-m", type=int, default=given.hnsw_m, help="hnsw: graph degree (default %(default)s)")
    text = "hnsw: candidates while building (default %(default)s)"
    add("--ef-construction", type=int, default=given.ef_construction, help=text)
    _add_knobs(add)
    text = "k of the recall measured at build (default %(default)s)"
    add("--recall-k", type=int, default=given.recall_k, help=text)
    text = "held-out indexed vectors the recall is measured on (default %(default)s)"
    add("--recall-sample", type=int, default=given.recall_sample, help=text)


def _add_search(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("search", help="rank the indexed images by distance to query images")
    add = parser.add_argument
    add("index", help="index folder written by 'gspdml index'")
    add("queries", nargs="+", metavar="QUERY_IMAGE", help="query image files")
    add("-k", type=int, default=10, help="results per query (default 10)")
    add("--json", action="store_true", help="print JSON instead of text")
    text = "also write the results (safetensors, read by gspdml.evaluation.RetrievalResults.load)"
    add("--save", metavar="FILE", help=text)
    add("--run", help="run directory of the model (default: the one recorded in the index)")
    backends = ("auto", *exact_search.BACKENDS)
    add("--backend", choices=backends, default="auto", help="auto = faiss when installed")
    _add_common(add, on_error=False)
    add = parser.add_argument_group("approximate search").add_argument
    _add_knobs(add)
    text = "search the exact vectors even if the index has an approximate one"
    add("--exact", action="store_true", help=text)
    postprocess.add_search_options(parser)
    parser.set_defaults(func=run_search)


def _add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add = command(sub, "report", run_report, help="write a self-contained HTML report of a run")
    add(
        "run_dir",
        help="run directory (config.yaml, model.safetensors, metrics.jsonl, results.json)",
    )
    text = "folder of labelled images for the retrieval grid (default: the run's test split)"
    add("--images", help=text)
    text = "split of the run's dataset for the retrieval grid (default test)"
    add("--split", choices=SPLITS, help=text)
    add("--out", help="HTML file to write (default RUN_DIR/report.html)")
    add("--queries", type=int, default=8, help="query rows in the retrieval grid (default 8)")
    text = "rows of the worst queries (lowest MAP@R) with their neighbours (default 8)"
    add("--worst", type=int, default=8, help=text)
    add("-k", type=int, default=5, help="results per query (default 5)")
    add("--seed", type=int, default=0, help="seed of the query choice (default 0)")
    _add_common(add)


def _add_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "export the embedder to TorchScript or ONNX, checked against PyTorch"
    add = command(sub, "export", run_export, help=text)
    add("run_dir", help="run directory (config.yaml + model.safetensors)")
    text = "torchscript (.pt) or onnx (.onnx)"
    add("--format", required=True, choices=tuple(FORMATS), help=text)
    add("--out", help="file to write (default RUN_DIR/export/embedder.pt|.onnx)")
    text = "input size when the eval transform does not fix it"
    add("--image-size", type=int, nargs=2, metavar=("H", "W"), help=text)
    text = f"largest allowed |difference| to PyTorch (default {TOLERANCE:g})"
    add("--tolerance", type=float, default=TOLERANCE, help=text)
    add("--no-check", action="store_true", help="skip the comparison with the PyTorch model")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``index``, ``search``, ``report`` and ``export`` on the ``gspdml`` sub-parsers."""
    for add in (_add_index, _add_search, _add_report, _add_export):
        add(subparsers)
