"""``gspdml cir freedom|weicom``: composed image retrieval over a folder of images.

    gspdml cir freedom --images DIR --labels labels.csv --vocabulary words.txt [--model clip]
    gspdml cir freedom --images DIR --queries queries.csv --vocabulary words.txt --method product
    gspdml cir freedom --images data --dataset minidn --vocabulary open_image_v7_class_names.csv
    gspdml cir freedom --images data --dataset ltll --vocabulary words.csv --memory laion.npy
    gspdml cir weicom  --images PatternNet --patterncom [--model remoteclip --weights RemoteCLIP-ViT-L-14.pt]
    gspdml cir weicom  --images DIR --queries queries.csv --lambda 0.5 --json

Queries come from one of:

* ``--labels CSV`` (header ``path,class,domain``): the domain-conversion protocol — every labelled
  image is a query once per other domain, with that domain's name as text; positives share the
  query's class and have the target domain (Psomas thesis §4.4.1);
* ``--queries CSV`` (header ``image,text`` and optionally ``positives``, ``;``-separated paths):
  explicit queries; without positives only rankings are printed;
* ``--dataset NAME`` (freedom): a FreeDom benchmark — ``imagenet_r``, ``minidn``, ``nico`` or
  ``ltll`` — in the layout of the authors' release, ``--images`` being the release's ``data/``
  folder (:mod:`gspdml.cir.domain_datasets`); ``--source LABEL`` keeps one source domain (e.g.
  ``real``, the PHOTO source of Table 4.2) and R@k defaults to the authors' cut-offs;
* ``--patterncom [DIR]`` (weicom): the PatternCom protocol from a PatternNet tree (``--images``)
  and its annotation CSVs (default ``<images>/PatternCom``).

Paths are relative to ``--images`` unless absolute. The database is every image under
``--images`` (with ``--labels``: the labelled images; with ``--dataset``: its database list; with
``--patterncom``: the PatternNet tree). FreeDom's visual memory (the proxy images of Eq. 4.13) is
the database unless ``--memory PATH`` names an external one — a folder of images or a ``.npy``
array of image embeddings ``[M, D]`` (ℓ2-normalised on load), e.g. LAION images as in Table 4.5;
``--memory-union`` uses the database and that memory together (Table 4.5's "Database + LAION").
Features are cached (safetensors) in ``--cache``. mAP uses the AP of each chapter's code by
default (``--ap``): the Radenović trapezoid for FreeDom, the standard AP for WeiCom.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from typing import Any, Sequence

from gspdml.cir.domain_datasets import DOMAIN_DATASETS
from gspdml.cir.evaluation import CirMethod, cir_method
from gspdml.cir.freedom import QUERY_AS_PROXY, VARIANTS
from gspdml.cir.queries import QuerySource
from gspdml.cir.ranking import AP_VARIANTS
from gspdml.cir.run import CirInputs, run_cir
from gspdml.output_files import json_text


def _method(args: argparse.Namespace) -> CirMethod:
    """The method of the command line (:func:`gspdml.cir.evaluation.cir_method`)."""
    options = {"lam": getattr(args, "lam", None)}
    if args.cir_method == "freedom":
        options.update(variant=args.variant, k=args.k, n=args.n, m=args.m)
        options.update(query_as_proxy=args.query_as_proxy)
    return cir_method(args.cir_method, args.method, args.model, **options)


def _run(args: argparse.Namespace) -> int:
    command, method = args.cir_method, _method(args)
    dataset, patterncom = getattr(args, "dataset", None), getattr(args, "patterncom", None)
    sources = getattr(args, "source", ())
    source = QuerySource(args.labels, args.queries, dataset, patterncom, sources, args.domain_text)
    inputs = CirInputs(**{f.name: getattr(args, f.name, f.default) for f in fields(CirInputs)})
    report = run_cir(command, args.images, method, source, inputs, note=_note)
    if args.json:
        print(json_text(report, indent=2))
    else:
        _print_text(report, args.show)
    return 0


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _print_text(report: dict[str, Any], show: int) -> None:
    settings = report["settings"]
    print("  ".join(f"{k}={v}" for k, v in settings.items()))
    for number, query in enumerate(report["queries"][:show], 1):
        ap = f"  AP {query['ap']:.2f}" if "ap" in query else ""
        print(f"\n[{number}] {query['image']} + {query['text']!r}{ap}")
        for rank, hit in enumerate(query["top"], 1):
            print(
                f"  {rank:3d}. {'+' if hit['positive'] else ' '} {hit['score']:.4f}  {hit['path']}"
            )
    if len(report["queries"]) > show:
        print(f"\n... {len(report['queries']) - show} more queries (--show N, or --json for all)")
    metrics = report.get("metrics")
    if metrics:
        recall = [k for k in metrics if k.startswith("recall@")]
        print(
            f"\n{'group':30s} {'queries':>8s} {'mAP':>7s}" + "".join(f" {k:>10s}" for k in recall)
        )
        for group, row in metrics["groups"].items():
            print(
                f"{group:30s} {row['queries']:8d} {row['map']:7.2f}"
                + "".join(f" {row[k]:10.2f}" for k in recall)
            )
        for source, row in metrics.get("sources", {}).items():
            print(
                f"{'from ' + source + ' (mean)':30s} {'':8s} {row['map']:7.2f}"
                + "".join(f" {row[k]:10.2f}" for k in recall)
            )
        print(
            f"{'AVG (mean over groups)':30s} {'':8s} {metrics['map']:7.2f}"
            + "".join(f" {metrics[k]:10.2f}" for k in recall)
            + f"   [AP: {metrics['ap']}]"
        )


def _common(parser: argparse.ArgumentParser, methods: Sequence[str], default_ap: str) -> None:
    parser.add_argument(
        "--images", required=True, help="folder of database images (searched recursively)"
    )
    parser.add_argument(
        "--labels", help="CSV path,class,domain: the domain-conversion protocol over these images"
    )
    parser.add_argument(
        "--domain-text",
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
