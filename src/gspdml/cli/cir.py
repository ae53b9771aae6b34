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
from collections.abc import Callable, Sequence
from typing import Any

from gspdml.cir.domain_datasets import DOMAIN_DATASETS
from gspdml.cir.evaluation import CirMethod, cir_method
from gspdml.cir.freedom import QUERY_AS_PROXY, VARIANTS
from gspdml.cir.generic_datasets import GENERIC_BENCHMARKS
from gspdml.cir.oracle import ORACLES
from gspdml.cir.queries import QuerySource
from gspdml.cir.ranking import AP_VARIANTS
from gspdml.cir.run import CirInputs, report_text, run_cir
from gspdml.cli.binding import call, command
from gspdml.output_files import json_text


def _method(args: argparse.Namespace) -> CirMethod:
    """The method of the command line (:func:`gspdml.cir.evaluation.cir_method`)."""
    return call(cir_method, args, command=args.cir_method, name=args.method)


def _run(args: argparse.Namespace) -> int:
    source, inputs = call(QuerySource, args), call(CirInputs, args)
    report = run_cir(args.cir_method, args.images, _method(args), source, inputs, note=_note)
    print(json_text(report, indent=2) if args.json else report_text(report, args.show))
    return 0


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _common(add: Callable[..., Any], methods: Sequence[str], default_ap: str) -> None:
    add("--images", required=True, help="folder of database images (searched recursively)")
    text = "CSV path,class,domain: the domain-conversion protocol over these images"
    add("--labels", help=text)
    text = "query text of a --labels domain (repeatable), e.g. real=photo, New=Today"
    add(
        "--domain-text",
        dest="domain_texts",
        action="append",
        default=[],
        metavar="LABEL=TEXT",
        help=text,
    )
    add("--queries", help="CSV image,text[,positives]: explicit composed queries")
    add("--method", choices=methods, default=methods[0], help=f"default: {methods[0]}")
    text = "clip | remoteclip | open_clip:ARCH[@TAG] | hf:REPO_OR_DIR | python:MODULE:FUNCTION"
    add("--model", default="clip", help=text)
    add("--weights", help="local checkpoint (state dict) for the model")
    add("--device", default="cpu")
    add("--batch-size", type=int, default=32, help="images per encoder batch")
    add("--cache", help="feature cache folder (default: $GSPDML_CACHE/cir-features)")
    add("--no-cache", action="store_true", help="do not read or write cached features")
    text = f"AP definition (default {default_ap}, as the authors' code)"
    add("--ap", choices=AP_VARIANTS, default=default_ap, help=text)
    add("--recall-at", type=int, nargs="*", default=[], metavar="K", help="also report R@K")
    add("--top", type=int, default=5, help="results listed per query")
    add("--show", type=int, default=10, help="queries printed in text mode")
    add("--json", action="store_true", help="print everything as JSON")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``cir`` with the sub-commands ``freedom`` and ``weicom`` to a ``gspdml`` parser."""
    text = "composed image retrieval with a frozen vision-language model"
    sub = subparsers.add_parser("cir", help=text).add_subparsers(
        dest="cir_method", required=True, metavar="METHOD"
    )
    text = "FreeDom (training-free domain conversion) and its baselines"
    add = command(sub, "freedom", _run, help=text)
    _common(add, ("freedom", "text", "image", "product", "sum", "weicom"), "trapezoid")
    add("--vocabulary", help="text memory: one word per line, or a CSV (Open Images class names)")
    text = "L+a is FreeDom (Eq. 4.17)"
    add("--variant", choices=list(VARIANTS), default=CirMethod.variant, help=text)
    add("--k", type=int, default=CirMethod.k, help=f"proxy images (default {CirMethod.k})")
    add("--n", type=int, default=CirMethod.n, help=f"words per proxy (default {CirMethod.n})")
    add("--m", type=int, default=None, help="text labels kept (default 7; 1 for --variant single)")
    add("--query-as-proxy", choices=QUERY_AS_PROXY, default=CirMethod.query_as_proxy)
    text = "oracle word added to the text labels: the query's class or source domain (Table 4.6)"
    add("--oracle", choices=ORACLES, default=CirMethod.oracle, help=text)
    text = (
        "a FreeDom benchmark in the authors' release layout, or fashioniq / cirr / circo in "
        "their official layouts (FashionIQ/, CIRR/, CIRCO/); --images is the data folder"
    )
    add("--dataset", choices=[*DOMAIN_DATASETS, *GENERIC_BENCHMARKS], help=text)
    text = "with --dataset: keep the queries of this source domain label (repeatable)"
    add("--source", dest="sources", action="append", default=[], metavar="LABEL", help=text)
    text = (
        "external visual memory: a folder of images or a .npy of embeddings (default: the database)"
    )
    add("--memory", metavar="PATH", help=text)
    text = "use the database and --memory together as the visual memory"
    add("--memory-union", action="store_true", help=text)
    text = "WeiCom (CDF-normalised similarity fusion) and its baselines"
    add = command(sub, "weicom", _run, help=text)
    _common(add, ("weicom", "text", "image", "average"), "standard")
    text = "text weight λ (default 0.3 for clip, 0.6 for remoteclip, else 0.5)"
    add("--lambda", dest="lam", type=float, default=None, help=text)
    text = "the PatternCom protocol; DIR holds <attribute>.csv (default <images>/PatternCom)"
    add("--patterncom", nargs="?", const="", default=None, metavar="DIR", help=text)
