"""``gspdml cir freedom|weicom``: composed image retrieval over a folder of images
(:mod:`gspdml.cir.run`; the query sources ``--labels``, ``--queries``, ``--dataset``,
``--patterncom`` are those of :mod:`gspdml.cir.queries`).

    gspdml cir freedom --images DIR --labels labels.csv --vocabulary words.txt [--model clip]
    gspdml cir freedom --images data --dataset ltll --vocabulary words.csv --memory laion.npy
    gspdml cir weicom  --images PatternNet --patterncom [--model remoteclip --weights W.pt]
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from gspdml.cir.domain_datasets import DOMAIN_DATASETS
from gspdml.cir.evaluation import CirMethod, cir_method
from gspdml.cir.freedom import QUERY_AS_PROXY, VARIANTS
from gspdml.cir.queries import QuerySource
from gspdml.cir.ranking import AP_VARIANTS
from gspdml.cir.run import CirInputs, report_text, run_cir
from gspdml.cli.binding import call
from gspdml.output_files import json_text


def _method(args: argparse.Namespace) -> CirMethod:
    """The method of the command line (:func:`gspdml.cir.evaluation.cir_method`)."""
    options = {"lam": getattr(args, "lam", None)}
    if args.cir_method == "freedom":
        options.update(variant=args.variant, k=args.k, n=args.n, m=args.m)
        options.update(query_as_proxy=args.query_as_proxy)
    return cir_method(args.cir_method, args.method, args.model, **options)


def _run(args: argparse.Namespace) -> int:
    source, inputs = call(QuerySource, args), call(CirInputs, args)
    report = run_cir(args.cir_method, args.images, _method(args), source, inputs, note=_note)
    print(json_text(report, indent=2) if args.json else report_text(report, args.show))
    return 0


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _common(parser: argparse.ArgumentParser, methods: Sequence[str], default_ap: str) -> None:
    parser.add_argument(
        "--images", required=True, help="folder of database images (searched recursively)"
    )
    parser.add_argument(
        "--labels", help="CSV path,class,domain: the domain-conversion protocol over these images"
    )
    parser.add_argument(
        "--domain-text",
        dest="domain_texts",
        action="append",
        default=[],
        metavar="LABEL=TEXT",
        help="query text of a --labels domain (repeatable), e.g. real=photo, New=Today",
    )
    parser.add_argument("--queries", help="CSV image,text[,positives]: explicit composed queries")
    parser.add_argument(
        "--method", choices=methods, default=methods[0], help=f"default: {methods[0]}"
    )
    parser.add_argument(
        "--model",
        default="clip",
        help="clip | remoteclip | open_clip:ARCH[@TAG] | hf:REPO_OR_DIR | python:MODULE:FUNCTION",
    )
    parser.add_argument("--weights", help="local checkpoint (state dict) for the model")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=32, help="images per encoder batch")
    parser.add_argument(
        "--cache", help="feature cache folder (default: $GSPDML_CACHE/cir-features)"
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write cached features"
    )
    parser.add_argument(
        "--ap",
        choices=AP_VARIANTS,
        default=default_ap,
        help=f"AP definition (default {default_ap}, as the authors' code)",
    )
    parser.add_argument(
        "--recall-at", type=int, nargs="*", default=[], metavar="K", help="also report R@K"
    )
    parser.add_argument("--top", type=int, default=5, help="results listed per query")
    parser.add_argument("--show", type=int, default=10, help="queries printed in text mode")
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    parser.set_defaults(func=_run)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``cir`` with the sub-commands ``freedom`` and ``weicom`` to a ``gspdml`` parser."""
    parser = subparsers.add_parser(
        "cir", help="composed image retrieval with a frozen vision-language model"
    )
    sub = parser.add_subparsers(dest="cir_method", required=True, metavar="METHOD")
    freedom = sub.add_parser(
        "freedom", help="FreeDom (training-free domain conversion) and its baselines"
    )
    _common(freedom, ("freedom", "text", "image", "product", "sum", "weicom"), "trapezoid")
    freedom.add_argument(
        "--vocabulary", help="text memory: one word per line, or a CSV (Open Images class names)"
    )
    freedom.add_argument(
        "--variant",
        choices=list(VARIANTS),
        default=CirMethod.variant,
        help="L+a is FreeDom (Eq. 4.17)",
    )
    freedom.add_argument(
        "--k", type=int, default=CirMethod.k, help=f"proxy images (default {CirMethod.k})"
    )
    freedom.add_argument(
        "--n", type=int, default=CirMethod.n, help=f"words per proxy (default {CirMethod.n})"
    )
    freedom.add_argument(
        "--m", type=int, default=None, help="text labels kept (default 7; 1 for --variant single)"
    )
    freedom.add_argument(
        "--query-as-proxy", choices=QUERY_AS_PROXY, default=CirMethod.query_as_proxy
    )
    freedom.add_argument(
        "--dataset",
        choices=list(DOMAIN_DATASETS),
        help="a FreeDom benchmark in the authors' release layout; --images is its data/ folder",
    )
    freedom.add_argument(
        "--source",
        dest="sources",
        action="append",
        default=[],
        metavar="LABEL",
        help="with --dataset: keep the queries of this source domain label (repeatable)",
    )
    freedom.add_argument(
        "--memory",
        metavar="PATH",
        help="external visual memory: a folder of images or a .npy of embeddings (default: the database)",
    )
    freedom.add_argument(
        "--memory-union",
        action="store_true",
        help="use the database and --memory together as the visual memory",
    )
    weicom = sub.add_parser(
        "weicom", help="WeiCom (CDF-normalised similarity fusion) and its baselines"
    )
    _common(weicom, ("weicom", "text", "image", "average"), "standard")
    weicom.add_argument(
        "--lambda",
        dest="lam",
        type=float,
        default=None,
        help="text weight λ (default 0.3 for clip, 0.6 for remoteclip, else 0.5)",
    )
    weicom.add_argument(
        "--patterncom",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="the PatternCom protocol; DIR holds <attribute>.csv (default <images>/PatternCom)",
    )
