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
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from gspdml.cir.composition_protocol import (
    CompositionProtocol,
    CompositionQuery,
    domain_conversion_protocol,
    source_domain_means,
)
from gspdml.cir.domain_datasets import (
    DOMAIN_DATASETS,
    domain_dataset_protocol,
    get_domain_dataset,
)
from gspdml.cir.evaluation import CirMethod, evaluate_cir, image_files
from gspdml.cir.features import FeatureCache
from gspdml.cir.freedom import QUERY_AS_PROXY, VARIANTS
from gspdml.cir.ranking import AP_VARIANTS
from gspdml.cir.vl_model import VisionLanguageEncoder
from gspdml.cir.weicom import default_lambda
from gspdml.data.textfiles import read_csv_records
from gspdml.errors import ConfigError, DataError
from gspdml.output_files import json_text


def _read_csv(path: str, required: Sequence[str]) -> list[dict]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"file not found: {file}")
    records = read_csv_records(file)
    columns = records[0][1] if records else []
    rows = [(number, dict(zip(columns, record))) for number, record in records[1:]]
    missing = [c for c in required if c not in columns]
    if not rows or missing:
        raise DataError(
            f"{file}: needs a header with columns {', '.join(required)} and at least one row (missing: {', '.join(missing) or 'rows'})"
        )
    for number, row in rows:
        if any(not (row.get(c) or "").strip() for c in required):
            raise DataError(f"{file}:{number}: empty {'/'.join(required)} value in {row}")
    return [row for _, row in rows]


def _resolve(images: Path, path: str) -> str:
    candidate = Path(path.strip()).expanduser()
    return str((candidate if candidate.is_absolute() else images / candidate).resolve())


def _protocol(
    args: argparse.Namespace, images: Path, cache_dir: Optional[Path]
) -> tuple[CompositionProtocol, bool]:
    """The protocol and whether it has positives (metrics)."""
    chosen = [
        name
        for name in ("labels", "queries", "dataset", "patterncom")
        if getattr(args, name, None) is not None
    ]
    if len(chosen) != 1:
        raise ConfigError(
            "queries",
            "give exactly one of --labels, --queries"
            + (", --dataset" if hasattr(args, "dataset") else "")
            + (", --patterncom" if hasattr(args, "patterncom") else ""),
        )
    if getattr(args, "source", None) and chosen != ["dataset"]:
        raise ConfigError("source", "--source selects source domains of a --dataset benchmark")
    if chosen == ["dataset"]:
        if not args.recall_at:
            args.recall_at = list(get_domain_dataset(args.dataset).recall_at)
        return domain_dataset_protocol(args.dataset, images, args.source or None), True
    if chosen == ["patterncom"]:
        from gspdml.cir.patterncom import read_patterncom, table_mismatches

        patterncom = read_patterncom(images, args.patterncom or None)
        mismatches = table_mismatches(patterncom)
        if mismatches:
            print(
                f"note: the annotations differ from Table 5.1 in {len(mismatches)} (attribute, class, value) cells, "
                f"e.g. {mismatches[0]}",
                file=sys.stderr,
            )
        return patterncom.protocol, True
    database = image_files(images, cache_dir)
    if chosen == ["labels"]:
        rows = _read_csv(args.labels, ("path", "class", "domain"))
        labelled = [_resolve(images, row["path"]) for row in rows]
        index = {path: i for i, path in enumerate(database)}
        unknown = [p for p in labelled if p not in index]
        if unknown:
            raise DataError(
                f"{args.labels}: {len(unknown)} labelled images are not under {images}, e.g. {unknown[0]}"
            )
        classes = [row["class"].strip() for row in rows]
        domains = [row["domain"].strip() for row in rows]
        return domain_conversion_protocol(
            labelled, classes, domains, domain_texts=_domain_texts(args.domain_text)
        ), True
    rows = _read_csv(args.queries, ("image", "text"))
    index = {path: i for i, path in enumerate(database)}
    query_images = list(dict.fromkeys(_resolve(images, row["image"]) for row in rows))
    position = {path: i for i, path in enumerate(query_images)}
    protocol = CompositionProtocol(database, query_images)
    has_positives = "positives" in rows[0]
    for number, row in enumerate(rows, 2):
        positives = []
        for path in filter(None, (p.strip() for p in (row.get("positives") or "").split(";"))):
            resolved = _resolve(images, path)
            if resolved not in index:
                raise DataError(
                    f"{args.queries}:{number}: positive {path!r} is not an image under {images}"
                )
            positives.append(index[resolved])
        protocol.queries.append(
            CompositionQuery(
                position[_resolve(images, row["image"])],
                row["text"].strip(),
                np.asarray(positives, dtype=np.int64),
            )
        )
    if has_positives and not any(len(query.positives) for query in protocol.queries):
        raise DataError(
            f"{args.queries}: the positives column is empty for every query, so mAP and recall "
            "are undefined (each query would score 0); list each query's positives (paths "
            "separated by ;), or drop the column to print rankings only"
        )
    return protocol, has_positives


def _domain_texts(pairs: Sequence[str]) -> dict[str, str]:
    texts = {}
    for pair in pairs:
        label, sep, text = pair.partition("=")
        if not sep or not label.strip() or not text.strip():
            raise ConfigError("domain-text", f"expected LABEL=TEXT (e.g. real=photo), got {pair!r}")
        texts[label.strip()] = text.strip()
    return texts


def _method(args: argparse.Namespace) -> CirMethod:
    """The method of the command line. WeiCom's λ defaults to the model's (Psomas thesis Table
    5.2) and, as the chapter-4 competitor of ``gspdml cir freedom``, to 0.5 (the two CDFs summed,
    §4.4.4)."""
    options: dict[str, Any] = {}
    if args.cir_method == "freedom":
        options.update(k=args.k, n=args.n, m=args.m, variant=args.variant)
        options.update(query_as_proxy=args.query_as_proxy)
    if args.method == "weicom":
        lam = getattr(args, "lam", None)
        if lam is None:
            lam = 0.5 if args.cir_method == "freedom" else default_lambda(args.model)
        options.update(lam=lam)
    return CirMethod(args.method, **options)


def _run(args: argparse.Namespace) -> int:
    from gspdml.cir.backends import load_model

    images = Path(args.images).expanduser().resolve()
    if not images.is_dir():
        raise DataError(f"--images: {images} is not a directory")
    if args.method == "freedom" and not args.vocabulary:
        raise ConfigError(
            "vocabulary",
            "FreeDom needs a text memory: --vocabulary FILE (one word per line, or the Open Images class-name CSV)",
        )
    if getattr(args, "memory", None) is not None and args.method != "freedom":
        raise ConfigError(
            "memory", f"--memory is FreeDom's visual memory; --method {args.method} has none"
        )
    method = _method(args)
    cache_dir = (
        None
        if args.no_cache
        else Path(args.cache).expanduser().resolve()
        if args.cache
        else FeatureCache.default_directory()
    )
    cache = FeatureCache(cache_dir) if cache_dir else None
    protocol, has_positives = _protocol(args, images, cache_dir)
    model = load_model(args.model, weights=args.weights, device=args.device)
    result = evaluate_cir(
        protocol,
        method,
        model,
        vocabulary=getattr(args, "vocabulary", None),
        memory=getattr(args, "memory", None),
        memory_union=getattr(args, "memory_union", False),
        ap=args.ap,
        recall_at=args.recall_at,
        keep_top=args.top,
        batch_size=args.batch_size,
        cache=cache,
    )
    report = _report(args, method, model, protocol, result, has_positives, images)
    if args.json:
        print(json_text(report, indent=2))
    else:
        _print_text(report, args.show)
    return 0


def _report(
    args: argparse.Namespace,
    method: CirMethod,
    model: VisionLanguageEncoder,
    protocol: CompositionProtocol,
    result: dict[str, Any],
    has_positives: bool,
    images: Path,
) -> dict[str, Any]:
    def shown(path: str) -> str:
        return str(Path(path).relative_to(images)) if Path(path).is_relative_to(images) else path

    settings = {
        "method": args.method,
        "model": model.model_id,
        "database": len(protocol.database),
        "queries": len(protocol.queries),
    }
    if args.method == "freedom":
        settings.update(
            variant=args.variant,
            k=method.k,
            n=method.n,
            m=method.labels_kept,
            query_as_proxy=method.query_as_proxy,
            memory=("database + " if args.memory_union else "") + args.memory
            if args.memory
            else "database",
        )
    if args.method == "weicom":
        settings["lambda"] = method.lam
    rankings = []
    for query, ranking in zip(protocol.queries, result["rankings"]):
        positives = set(query.positives.tolist())
        entry = {
            "image": shown(protocol.query_images[query.image]),
            "text": query.text,
            "group": query.group,
            "top": [
                {
                    "path": shown(protocol.database[i]),
                    "score": round(s, 6),
                    "positive": i in positives,
                }
                for i, s in zip(ranking["indices"], ranking["scores"])
            ],
        }
        if has_positives:
            entry["ap"] = 100.0 * ranking["ap"]
        rankings.append(entry)
    report: dict[str, Any] = {"settings": settings, "queries": rankings}
    if has_positives:
        metrics = {
            key: value for key, value in result.items() if key not in ("rankings", "queries")
        }
        sources = source_domain_means(result["groups"])
        if sources:
            metrics["sources"] = sources
        report["metrics"] = metrics
    return report


def _print_text(report: dict, show: int) -> None:
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
