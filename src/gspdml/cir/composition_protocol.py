"""Composed-retrieval evaluation protocols: queries (image, text) with known positives, and the
per-group averaging of the two chapters.

* Domain conversion (FreeDom, Psomas thesis §4.4.1): every query image of source
  domain D_s is paired with every other target domain D_t as text; positives are the database
  images of the query's class in D_t. One group per (D_s, D_t) pair; AVG = mean over pairs.
* Attribute modification (PatternCom, Psomas thesis §5.4.1): built by :mod:`gspdml.cir.patterncom`; one group
  per attribute; AVG = mean over attributes (reproduces the AVG column of the Psomas thesis Table 5.2).

Every query ranks the whole database; a query image that is in the database stays there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import torch

from gspdml.errors import DataError

from .freedom import check_choice
from .ranking import AP_VARIANTS, ranking_metrics

ScoreFunction = Callable[[torch.Tensor, list[str]], torch.Tensor]


@dataclass
class CompositionQuery:
    image: int  # index into CompositionProtocol.query_images
    text: str
    positives: np.ndarray  # database indices
    group: str = "all"


@dataclass
class CompositionProtocol:
    """The database, the query images and the queries; ``query_classes`` /
    ``query_domains``: each query image's class label and source-domain text where the protocol
    knows them (domain conversion; the oracle of :mod:`gspdml.cir.oracle` reads them)."""

    database: list[str]
    query_images: list[str]
    queries: list[CompositionQuery] = field(default_factory=list)
    query_classes: list[str] = field(default_factory=list)
    query_domains: list[str] = field(default_factory=list)

    def relevance(self, queries: Sequence[CompositionQuery]) -> torch.Tensor:
        """Boolean ``[len(queries), len(database)]``."""
        relevant = torch.zeros(len(queries), len(self.database), dtype=torch.bool)
        for row, query in enumerate(queries):
            relevant[row, torch.as_tensor(query.positives, dtype=torch.long)] = True
        return relevant

    def groups(self) -> list[str]:
        return list(dict.fromkeys(q.group for q in self.queries))


def domain_conversion_protocol(
    database: Sequence[str],
    classes: Sequence[str],
    domains: Sequence[str],
    query_images: Optional[Sequence[str]] = None,
    query_classes: Optional[Sequence[str]] = None,
    query_domains: Optional[Sequence[str]] = None,
    domain_texts: Optional[dict[str, str]] = None,
) -> CompositionProtocol:
    """The FreeDom protocol. Without separate query lists the database images are the queries
    (ImageNet-R, LTLL); ``domain_texts`` maps a domain label to its query text (e.g.
    ``{"real": "photo"}``, github.com/NikosEfth/freedom), default the label itself."""
    if not len(database) == len(classes) == len(domains):
        raise DataError(
            f"{len(database)} database images but {len(classes)} classes and {len(domains)} domains"
        )
    if query_images is None:
        query_images, query_classes, query_domains = database, classes, domains
    elif (
        query_classes is None
        or query_domains is None
        or not len(query_images) == len(query_classes) == len(query_domains)
    ):
        raise DataError("separate query images need a class and a domain each")
    domain_texts = dict(domain_texts or {})
    db_classes, db_domains = np.asarray(classes), np.asarray(domains)
    all_domains = list(dict.fromkeys(domains))
    protocol = CompositionProtocol(list(database), list(query_images))
    protocol.query_classes = list(query_classes)
    protocol.query_domains = [domain_texts.get(d, d) for d in query_domains]
    for index, (cls, source) in enumerate(zip(query_classes, query_domains)):
        for target in all_domains:
            if target == source:
                continue
            positives = np.flatnonzero((db_classes == cls) & (db_domains == target))
            protocol.queries.append(
                CompositionQuery(
                    index, domain_texts.get(target, target), positives, f"{source}->{target}"
                )
            )
    return protocol


def evaluate_protocol(
    protocol: CompositionProtocol,
    score: ScoreFunction,
    ap: str = "standard",
    recall_at: Iterable[int] = (),
    chunk: int = 256,
    keep_top: int = 0,
) -> dict[str, Any]:
    """Run ``score(query_image_indices [B], texts) -> [B, N]`` over all queries in chunks.

    Returns ``{"map", "recall@k"…, "groups": {group: {"map", "recall@k"…, "queries"}}, "queries",
    "ap"}`` with metrics in % (the means of the groups, as the thesis tables average them) and,
    when ``keep_top`` > 0, ``"rankings"``: per query the top database indices, scores and AP.
    """
    check_choice("ap", "AP variant", ap, AP_VARIANTS)
    if not protocol.queries:
        raise DataError("the protocol has no queries")
    recall_at = list(recall_at)
    per_query: dict[str, list[torch.Tensor]] = {}
    rankings = []
    for start in range(0, len(protocol.queries), chunk):
        batch = protocol.queries[start : start + chunk]
        scores = score(torch.tensor([q.image for q in batch]), [q.text for q in batch])
        if scores.shape != (len(batch), len(protocol.database)):
            raise DataError(
                f"score function returned shape {tuple(scores.shape)}, expected {(len(batch), len(protocol.database))}"
            )
        metrics = ranking_metrics(scores, protocol.relevance(batch), ap=[ap], recall_at=recall_at)
        for name, column in metrics.items():
            per_query.setdefault(name, []).append(column)
        if keep_top:  # the same stable order as the metrics
            top = torch.sort(-scores, dim=1, stable=True).indices[:, :keep_top]
            top_scores = torch.gather(scores, 1, top).tolist()
            aps = metrics[f"ap_{ap}"].tolist()
            rankings += [
                {"indices": i, "scores": s, "ap": a}
                for i, s, a in zip(top.tolist(), top_scores, aps)
            ]
    values = {name: torch.cat(parts) for name, parts in per_query.items()}
    groups = np.array([q.group for q in protocol.queries])
    names = {f"ap_{ap}": "map", **{f"recall@{k}": f"recall@{k}" for k in recall_at}}
    table: dict[str, dict[str, float]] = {}
    for group in protocol.groups():
        mask = torch.from_numpy(groups == group)
        table[group] = {
            out: 100.0 * values[name][mask].mean().item() for name, out in names.items()
        }
        table[group]["queries"] = int(mask.sum())
    result: dict[str, Any] = {
        out: float(np.mean([row[out] for row in table.values()])) for out in names.values()
    }
    result.update(groups=table, queries=len(protocol.queries), ap=ap)
    if keep_top:
        result["rankings"] = rankings
    return result


def source_domain_means(groups: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per source domain, the means of the metrics of its ``source->target`` groups: the
    columns of the Psomas thesis Table 4.1 (one per source domain, averaged over the target
    domains; their mean is the AVG column). Groups not named ``source->target`` are left out."""
    by_source: dict[str, list[dict[str, Any]]] = {}
    for group, row in groups.items():
        source, arrow, _ = group.partition("->")
        if arrow:
            by_source.setdefault(source, []).append(row)
    return {
        source: {
            name: float(np.mean([row[name] for row in rows]))
            for name in rows[0]
            if name != "queries"
        }
        for source, rows in by_source.items()
    }
