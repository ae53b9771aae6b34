"""One ``gspdml cir freedom|weicom`` run over a folder of images: its queries
(:mod:`gspdml.cir.queries`), a vision-language model (:func:`gspdml.cir.backends.load_model`), the
one evaluation pipeline (:func:`gspdml.cir.evaluation.evaluate_cir`) and the report the command
prints: the settings, each query's top results and, when the queries have positives, the metrics
per group, per source domain and their mean.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gspdml.errors import DataError

from .composition_protocol import CompositionProtocol, source_domain_means
from .evaluation import CirMethod, evaluate_cir, require_memories
from .features import FeatureCache
from .queries import CirQueries, QuerySource, read_cir_queries
from .vl_model import VisionLanguageEncoder


@dataclass(frozen=True)
class CirInputs:
    """The rest of a run: the model (``model``: a :func:`~gspdml.cir.backends.load_model`
    spec, with local ``weights``), FreeDom's memories (``vocabulary``, ``memory``,
    ``memory_union``), the AP definition, extra Recall@K cut-offs (none: the benchmark's), the
    results kept per query, the encoder batch and the feature cache (``cache``: its folder,
    default :meth:`FeatureCache.default_directory`; ``no_cache``: none)."""

    model: str = "clip"
    weights: Optional[str] = None
    device: str = "cpu"
    vocabulary: Optional[str] = None
    memory: Optional[str] = None
    memory_union: bool = False
    ap: str = "standard"
    recall_at: Sequence[int] = ()
    top: int = 5
    batch_size: int = 32
    cache: Optional[str] = None
    no_cache: bool = False


def run_cir(
    command: str,
    images: str | Path,
    method: CirMethod,
    source: QuerySource,
    inputs: CirInputs,
    note: Callable[[str], None],
) -> dict[str, Any]:
    """Evaluate ``method`` on the queries of ``source`` over the images under ``images``;
    returns the report (module docstring). ``note`` gets remarks on the annotations."""
    from .backends import load_model

    folder = Path(images).expanduser().resolve()
    if not folder.is_dir():
        raise DataError(f"--images: {folder} is not a directory")
    require_memories(method, inputs.vocabulary, inputs.memory)
    cache_dir = None
    if not inputs.no_cache:
        chosen = inputs.cache
        cache_dir = (
            Path(chosen).expanduser().resolve() if chosen else FeatureCache.default_directory()
        )
    queries = read_cir_queries(command, folder, source, cache_dir, note)
    model = load_model(inputs.model, weights=inputs.weights, device=inputs.device)
    result = evaluate_cir(
        queries.protocol,
        method,
        model,
        vocabulary=inputs.vocabulary,
        memory=inputs.memory,
        memory_union=inputs.memory_union,
        ap=inputs.ap,
        recall_at=inputs.recall_at or queries.recall_at,
        keep_top=inputs.top,
        batch_size=inputs.batch_size,
        cache=FeatureCache(cache_dir) if cache_dir else None,
    )
    return cir_report(method, inputs, model, queries, result, folder)


def cir_report(
    method: CirMethod,
    inputs: CirInputs,
    model: VisionLanguageEncoder,
    queries: CirQueries,
    result: dict[str, Any],
    images: Path,
) -> dict[str, Any]:
    """The report of a run: ``settings``, ``queries`` (each with its ``top`` results, paths
    relative to ``images``, and its AP when there are positives) and ``metrics``."""
    protocol: CompositionProtocol = queries.protocol

    def shown(path: str) -> str:
        return str(Path(path).relative_to(images)) if Path(path).is_relative_to(images) else path

    settings: dict[str, Any] = {
        "method": method.name,
        "model": model.model_id,
        "database": len(protocol.database),
        "queries": len(protocol.queries),
    }
    if method.name == "freedom":
        memory = inputs.memory
        settings.update(
            variant=method.variant,
            k=method.k,
            n=method.n,
            m=method.labels_kept,
            query_as_proxy=method.query_as_proxy,
            memory=("database + " if inputs.memory_union else "") + memory
            if memory
            else "database",
        )
    if method.oracle != "none":
        settings["oracle"] = method.oracle
    if method.name == "weicom":
        settings["lambda"] = method.lam
    rankings = []
    for query, ranking in zip(protocol.queries, result["rankings"]):
        positives = set(query.positives.tolist())
        top = zip(ranking["indices"], ranking["scores"])
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
                for i, s in top
            ],
        }
        if queries.has_positives:
            entry["ap"] = 100.0 * ranking["ap"]
        rankings.append(entry)
    report: dict[str, Any] = {"settings": settings, "queries": rankings}
    if queries.has_positives:
        metrics = {
            key: value for key, value in result.items() if key not in ("rankings", "queries")
        }
        sources = source_domain_means(result["groups"])
        if sources:
            metrics["sources"] = sources
        report["metrics"] = metrics
    return report


def report_text(report: dict[str, Any], show: int) -> str:
    """The report as text: the settings, the first ``show`` queries with their results (``+``:
    a positive) and the metrics table (per group, per source domain, their mean)."""
    settings = report["settings"]
    out = ["  ".join(f"{k}={v}" for k, v in settings.items())]
    for number, query in enumerate(report["queries"][:show], 1):
        ap = f"  AP {query['ap']:.2f}" if "ap" in query else ""
        out.append(f"\n[{number}] {query['image']} + {query['text']!r}{ap}")
        for rank, hit in enumerate(query["top"], 1):
            mark = "+" if hit["positive"] else " "
            out.append(f"  {rank:3d}. {mark} {hit['score']:.4f}  {hit['path']}")
    if len(report["queries"]) > show:
        more = len(report["queries"]) - show
        out.append(f"\n... {more} more queries (--show N, or --json for all)")
    metrics = report.get("metrics")
    if metrics:
        recall = [k for k in metrics if k.startswith("recall@")]

        def values(row: dict[str, Any]) -> str:
            return "".join(f" {row[k]:10.2f}" for k in recall)

        columns = "".join(f" {k:>10s}" for k in recall)
        out.append(f"\n{'group':30s} {'queries':>8s} {'mAP':>7s}" + columns)
        for group, row in metrics["groups"].items():
            out.append(f"{group:30s} {row['queries']:8d} {row['map']:7.2f}" + values(row))
        for source, row in metrics.get("sources", {}).items():
            mean = f"{'from ' + source + ' (mean)':30s} {'':8s} {row['map']:7.2f}"
            out.append(mean + values(row))
        average = f"{'AVG (mean over groups)':30s} {'':8s} {metrics['map']:7.2f}"
        out.append(average + values(metrics) + f"   [AP: {metrics['ap']}]")
    return "\n".join(out)
