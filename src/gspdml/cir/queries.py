"""The composed queries of ``gspdml cir``, from exactly one source:

* a labels CSV (header ``path,class,domain``): the domain-conversion protocol, every labelled image
  a query once per other domain, with that domain's text (Psomas thesis §4.4.1;
  :func:`~gspdml.cir.composition_protocol.domain_conversion_protocol`);
* a queries CSV (header ``image,text`` and optionally ``positives``, ``;``-separated paths):
  explicit queries; without positives only rankings can be reported;
* a FreeDom benchmark in the layout of the authors' release (:mod:`gspdml.cir.domain_datasets`),
  with its own Recall@k cut-offs, or a generic benchmark of Table 4.7 (Fashion-IQ, CIRR, CIRCO)
  in its official layout under the images folder (:mod:`gspdml.cir.generic_datasets`);
* the PatternCom protocol of a PatternNet tree (:mod:`gspdml.cir.patterncom`).

Paths in a CSV are relative to the images folder unless absolute; the database is every image
under it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from gspdml.data.textfiles import read_csv_records
from gspdml.errors import ConfigError, DataError

from .composition_protocol import CompositionProtocol, CompositionQuery, domain_conversion_protocol
from .domain_datasets import domain_dataset_protocol, get_domain_dataset
from .evaluation import image_files
from .generic_datasets import GENERIC_BENCHMARKS, generic_protocol

#: the query sources each ``gspdml cir`` command offers
SOURCES = {
    "freedom": ("labels", "queries", "dataset"),
    "weicom": ("labels", "queries", "patterncom"),
}


@dataclass(frozen=True)
class QuerySource:
    """Where the queries come from: exactly one of ``labels`` (CSV), ``queries`` (CSV),
    ``dataset`` (a FreeDom benchmark name, its queries of the ``sources`` domains only when
    given) or ``patterncom`` (the annotations folder; '' for ``<images>/PatternCom``);
    ``domain_texts`` gives the query text of a labels CSV's domains (``LABEL=TEXT``)."""

    labels: Optional[str] = None
    queries: Optional[str] = None
    dataset: Optional[str] = None
    patterncom: Optional[str] = None
    sources: Sequence[str] = ()
    domain_texts: Sequence[str] = ()


@dataclass(frozen=True)
class CirQueries:
    """The protocol, whether its queries have positives (metrics can be computed) and the
    Recall@k cut-offs of its benchmark (empty: none of its own)."""

    protocol: CompositionProtocol
    has_positives: bool
    recall_at: tuple[int, ...] = ()


def read_query_csv(path: str | Path, required: Sequence[str]) -> list[dict[str, str]]:
    """The rows of a CSV with a header holding the ``required`` columns, each non-empty; a file
    without rows or columns, or an empty value, is refused naming the file (and the line)."""
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


def read_cir_queries(
    command: str,
    images: Path,
    source: QuerySource,
    cache_dir: Optional[Path],
    note: Callable[[str], None],
) -> CirQueries:
    """The queries of ``gspdml cir COMMAND`` over the images folder ``images`` (module
    docstring); ``cache_dir`` (the feature cache) is not part of the database; ``note`` gets
    how PatternCom's annotations differ from the published table."""
    offered = SOURCES[command]
    chosen = [name for name in offered if getattr(source, name) is not None]
    if len(chosen) != 1:
        raise ConfigError("queries", f"give exactly one of {', '.join('--' + n for n in offered)}")
    if source.sources and chosen != ["dataset"]:
        raise ConfigError("source", "--source selects source domains of a --dataset benchmark")
    if source.dataset in GENERIC_BENCHMARKS:
        if source.sources:
            raise ConfigError(
                "source", f"--source selects source domains; {source.dataset} has none"
            )
        return CirQueries(generic_protocol(source.dataset, images), True)
    if source.dataset is not None:
        protocol = domain_dataset_protocol(source.dataset, images, source.sources or None)
        return CirQueries(protocol, True, tuple(get_domain_dataset(source.dataset).recall_at))
    if source.patterncom is not None:
        from .patterncom import read_patterncom, table_mismatches

        patterncom = read_patterncom(images, source.patterncom or None)
        mismatches = table_mismatches(patterncom)
        if mismatches:
            note(
                f"note: the annotations differ from Table 5.1 in {len(mismatches)} (attribute, class, value) cells, "
                f"e.g. {mismatches[0]}"
            )
        return CirQueries(patterncom.protocol, True)
    database = image_files(images, cache_dir)
    if source.labels is not None:
        texts = _domain_texts(source.domain_texts)
        return CirQueries(_labels_protocol(source.labels, images, database, texts), True)
    assert source.queries is not None
    return _queries_protocol(source.queries, images, database)


def _resolve(images: Path, path: str) -> str:
    candidate = Path(path.strip()).expanduser()
    return str((candidate if candidate.is_absolute() else images / candidate).resolve())


def _labels_protocol(
    csv: str, images: Path, database: list[str], texts: dict[str, str]
) -> CompositionProtocol:
    rows = read_query_csv(csv, ("path", "class", "domain"))
    labelled = [_resolve(images, row["path"]) for row in rows]
    known = set(database)
    unknown = [p for p in labelled if p not in known]
    if unknown:
        raise DataError(
            f"{csv}: {len(unknown)} labelled images are not under {images}, e.g. {unknown[0]}"
        )
    classes = [row["class"].strip() for row in rows]
    domains = [row["domain"].strip() for row in rows]
    return domain_conversion_protocol(labelled, classes, domains, domain_texts=texts)


def _queries_protocol(csv: str, images: Path, database: list[str]) -> CirQueries:
    rows = read_query_csv(csv, ("image", "text"))
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
                raise DataError(f"{csv}:{number}: positive {path!r} is not an image under {images}")
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
            f"{csv}: the positives column is empty for every query, so mAP and recall "
            "are undefined (each query would score 0); list each query's positives (paths "
            "separated by ;), or drop the column to print rankings only"
        )
    return CirQueries(protocol, has_positives)


def _domain_texts(pairs: Sequence[str]) -> dict[str, str]:
    texts = {}
    for pair in pairs:
        label, sep, text = pair.partition("=")
        if not sep or not label.strip() or not text.strip():
            raise ConfigError("domain-text", f"expected LABEL=TEXT (e.g. real=photo), got {pair!r}")
        texts[label.strip()] = text.strip()
    return texts
