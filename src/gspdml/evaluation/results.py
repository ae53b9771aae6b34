"""The one retrieval-results type: the exact kNN engine and the search index return it, the
metrics score it, the CLI prints it and the HTML report draws it.

After open-metric-learning's ``RetrievalResults`` (github.com/OML-Team/open-metric-learning):
one object carries the ranked neighbours of every query plus what is needed to judge and show
them. Query i's row lists reference (gallery) rows ordered by (distance, index), nearest first.

Labels are stored as int64 codes into ``label_values`` (one shared coding for both sides, so
int64 ids stay exact and strings work alike); code ``-1`` marks an unknown label (an unlabelled
image). ``excluded[i]`` is the reference row left out of query i's search (leave-one-out: the
query itself is among the references). The number of relevant references of query i is

    R_i = #{j : y_ref(j) = y_i} - [y_ref(excluded[i]) = y_i]

(Musgrave et al., "A Metric Learning Reality Check", ECCV 2020, §3.2; Gürbüz thesis §1.2), the
quantity that MAP@R and R-precision divide by.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from gspdml.errors import ConfigError, DataError, printable
from gspdml.output_files import atomic_write

UNKNOWN = -1
METRICS = ("squared_euclidean", "euclidean", "cosine")
FORMAT = "gspdml-retrieval-results"
VERSION = 1
_TENSORS = ("indices", "distances", "query_labels", "reference_labels")
_LABEL_KINDS = {"i": "int", "u": "int", "b": "bool", "U": "str", "S": "bytes"}
#: embeddings as given: float [N, D], a tensor or a numpy array
Embeddings = Union[torch.Tensor, np.ndarray]
#: labels as given: ints or strings (None where unknown), as a sequence, numpy array or tensor
LabelsLike = Union[torch.Tensor, np.ndarray, Sequence[Any]]


@dataclass(frozen=True)
class Hit:
    """One retrieved reference: its ``rank`` (1 = nearest), reference row ``index``, ``path``
    (None where unknown), original ``label``, ``distance`` and whether it is ``correct`` (None
    where either label is unknown)."""

    rank: int
    index: int
    path: Optional[str]
    label: Any
    distance: float
    correct: Optional[bool]


@dataclass(frozen=True)
class QueryHits:
    """The ranked :class:`Hit` list of query row ``query_index`` (``query``: its path)."""

    query_index: int
    query: Optional[str]
    label: Any
    metric: str
    results: list[Hit]


def _label_text(label: Any) -> str:
    return f"  [{printable(str(label))}]" if label is not None else ""


@dataclass(frozen=True, eq=False)
class RetrievalResults:
    """Nearest references of every query, with the labels and paths needed to score and show them.

    Attributes:
        indices: int64 [N_q, k], reference rows ordered by (distance, index), nearest first.
        distances: float [N_q, k], their distances to the query, in the unit named by ``metric``.
        query_labels: int64 [N_q], label codes into ``label_values``; -1 where unknown.
        reference_labels: int64 [N_r], same coding.
        label_values: numpy array [L], original label of each code (ints or strings).
        excluded: int64 [N_q] or None: the reference row left out of each query's search (the
            query itself in leave-one-out retrieval).
        metric: what ``distances`` holds: "squared_euclidean" (the kNN engine), "euclidean"
            (||q - r||) or "cosine" (1 - cos(q, r)).
        query_paths, reference_paths: file (or item) names of both sides, or None when unknown.
        num_relevant: int64 [N_q], R_i (derived; 0 for a query of unknown label).
        r_max: max_i R_i, the k that MAP@R needs (derived).

    All tensors are kept on the CPU; :meth:`from_labels` builds one from raw labels.
    """

    indices: torch.Tensor
    distances: torch.Tensor
    query_labels: torch.Tensor
    reference_labels: torch.Tensor
    label_values: np.ndarray
    excluded: Optional[torch.Tensor] = None
    metric: str = "squared_euclidean"
    query_paths: Optional[tuple[str, ...]] = None
    reference_paths: Optional[tuple[str, ...]] = None
    num_relevant: torch.Tensor = field(init=False, repr=False)
    r_max: int = field(init=False)

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in _TENSORS:
            put(name, torch.as_tensor(getattr(self, name)).detach().cpu())
        if self.excluded is not None:
            put("excluded", torch.as_tensor(self.excluded, dtype=torch.int64).cpu())
        put("label_values", np.asarray(self.label_values))
        for name in ("query_paths", "reference_paths"):
            if getattr(self, name) is not None:
                put(name, tuple(str(p) for p in getattr(self, name)))
        self._check()
        codes = self.query_labels, self.reference_labels
        put("num_relevant", relevant_counts(*codes, len(self.label_values), self.excluded))
        put("r_max", int(self.num_relevant.max()) if len(self.num_relevant) else 0)

    def _check(self) -> None:
        n_q, n_r = len(self.query_labels), len(self.reference_labels)
        if self.metric not in METRICS:
            raise ConfigError(
                "metric", f"unknown results metric {self.metric!r}; allowed: {', '.join(METRICS)}"
            )
        if (
            self.indices.dtype != torch.int64
            or self.indices.dim() != 2
            or self.indices.shape[0] != n_q
        ):
            raise ConfigError(
                "indices",
                f"expected int64 [{n_q}, k] (one row per query label), got {self.indices.dtype} {tuple(self.indices.shape)}",
            )
        if self.distances.shape != self.indices.shape or not self.distances.is_floating_point():
            raise ConfigError(
                "distances",
                f"expected float {tuple(self.indices.shape)} like indices, got {self.distances.dtype} {tuple(self.distances.shape)}",
            )
        if self.indices.numel() and not (
            int(self.indices.min()) >= 0 and int(self.indices.max()) < n_r
        ):
            raise ConfigError(
                "indices",
                f"reference rows must lie in [0, {n_r}), got [{int(self.indices.min())}, {int(self.indices.max())}]",
            )
        for name, codes in (
            ("query_labels", self.query_labels),
            ("reference_labels", self.reference_labels),
        ):
            if codes.dtype != torch.int64 or codes.dim() != 1:
                raise ConfigError(
                    name, f"expected int64 label codes [N], got {codes.dtype} {tuple(codes.shape)}"
                )
            if codes.numel() and not (
                int(codes.min()) >= UNKNOWN and int(codes.max()) < len(self.label_values)
            ):
                raise ConfigError(
                    name,
                    f"label codes must lie in [-1, {len(self.label_values)}), got [{int(codes.min())}, {int(codes.max())}]",
                )
        if self.excluded is not None and (
            self.excluded.shape != (n_q,)
            or (n_q and not (int(self.excluded.min()) >= 0 and int(self.excluded.max()) < n_r))
        ):
            raise ConfigError(
                "excluded",
                f"expected one reference row in [0, {n_r}) per query ({n_q}), got shape {tuple(self.excluded.shape)}",
            )
        for name, paths, n in (
            ("query_paths", self.query_paths, n_q),
            ("reference_paths", self.reference_paths, n_r),
        ):
            if paths is not None and len(paths) != n:
                raise ConfigError(name, f"has {len(paths)} entries for {n} rows")

    @classmethod
    def from_labels(
        cls,
        indices: torch.Tensor,
        distances: torch.Tensor,
        query_labels: Sequence[Any],
        reference_labels: Sequence[Any],
        **kwargs: Any,
    ) -> RetrievalResults:
        """Results from raw labels (ints or strings, None where unknown); other fields as keywords."""
        values, query_codes, reference_codes = encode_labels(query_labels, reference_labels)
        return cls(indices, distances, query_codes, reference_codes, values, **kwargs)

    @property
    def k(self) -> int:
        return int(self.indices.shape[1])

    @property
    def leave_one_out(self) -> bool:
        """Whether one reference row (the query itself) was left out of each query's search."""
        return self.excluded is not None

    @property
    def num_searchable(self) -> int:
        """References each query could retrieve: N_r, minus the excluded row."""
        return len(self.reference_labels) - int(self.leave_one_out)

    @property
    def lone_queries(self) -> torch.Tensor:
        """Bool [N_q]: queries whose class has no other member among the references (R_i = 0)."""
        return self.num_relevant == 0

    @property
    def fully_labelled(self) -> bool:
        """Whether every query and reference has a label (the metrics need that)."""
        return bool(
            (self.query_labels != UNKNOWN).all() and (self.reference_labels != UNKNOWN).all()
        )

    def relevance(self) -> torch.Tensor:
        """Bool [N_q, k]: whether each retrieved reference has the query's (known) label."""
        same = self.reference_labels[self.indices] == self.query_labels[:, None]
        return same & (self.query_labels[:, None] != UNKNOWN)

    def label(self, code: int) -> Any:
        """The original label of a code (a plain Python value), None for -1."""
        return None if code == UNKNOWN else self.label_values[code].item()

    def select(self, queries: Sequence[int], k: Optional[int] = None) -> RetrievalResults:
        """The results of ``queries`` (positions, in that order) with their first ``k``
        neighbours (default: all ``self.k``); the references stay the same."""
        rows = torch.as_tensor(list(queries), dtype=torch.int64)
        k = self.k if k is None else min(int(k), self.k)
        return replace(
            self,
            indices=self.indices[rows, :k],
            distances=self.distances[rows, :k],
            query_labels=self.query_labels[rows],
            excluded=None if self.excluded is None else self.excluded[rows],
            query_paths=None
            if self.query_paths is None
            else tuple(self.query_paths[i] for i in rows.tolist()),
        )

    def hits(self) -> list[QueryHits]:
        """The ranked results of every query, typed (:class:`QueryHits`)."""
        q_labels, r_labels = self.query_labels.tolist(), self.reference_labels.tolist()
        r_paths, q_paths = self.reference_paths, self.query_paths
        out = []
        rows = zip(q_labels, self.distances.tolist(), self.indices.tolist())
        for q, (q_code, dist_row, index_row) in enumerate(rows):
            results = [
                Hit(
                    rank,
                    j,
                    None if r_paths is None else r_paths[j],
                    self.label(r_labels[j]),
                    d,
                    None if UNKNOWN in (q_code, r_labels[j]) else q_code == r_labels[j],
                )
                for rank, (d, j) in enumerate(zip(dist_row, index_row), start=1)
            ]
            query = None if q_paths is None else q_paths[q]
            out.append(QueryHits(q, query, self.label(q_code), self.metric, results))
        return out

    def rows(self) -> list[dict[str, Any]]:
        """JSON-ready: :meth:`hits` as mappings, one per query, ``{"query_index", "query" (path),
        "label", "metric", "results": [{"rank", "index", "path", "label", "distance",
        "correct"}]}``."""
        return [asdict(row) for row in self.hits()]

    def format_text(self) -> str:
        """Plain text: per query, rank, distance, path (or ``#row``) and label of each result;
        names are :func:`~gspdml.errors.printable` (one line per result, nothing reaches the
        terminal as a control sequence)."""
        lines = []
        for row in self.hits():
            name = printable(row.query) if row.query is not None else f"#{row.query_index}"
            lines.append(f"query: {name}{_label_text(row.label)}")
            for hit in row.results:
                path = printable(hit.path) if hit.path is not None else f"#{hit.index}"
                lines.append(f"  {hit.rank:>3}  {hit.distance:.6f}  {path}{_label_text(hit.label)}")
        return "\n".join(lines)

    def save(self, path: str | Path) -> None:
        """Write one safetensors file (replaced atomically): the tensors, plus the metric, label
        values and paths as JSON in its header metadata. Label values must be ints or strings."""
        path = Path(path)
        tensors = {name: getattr(self, name).clone() for name in _TENSORS}  # may share memory
        if self.excluded is not None:
            tensors["excluded"] = self.excluded.clone()
        values = [self.label(c) for c in range(len(self.label_values))]
        if any(not isinstance(v, (int, str)) for v in values):
            raise ConfigError(
                "label_values",
                f"only int or string labels can be saved, got {self.label_values.dtype}",
            )
        metadata = {
            "format": FORMAT,
            "version": str(VERSION),
            "metric": self.metric,
            "label_values": json.dumps(values),
            "query_paths": json.dumps(self.query_paths),
            "reference_paths": json.dumps(self.reference_paths),
        }
        atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=metadata))

    @classmethod
    def load(cls, path: str | Path) -> RetrievalResults:
        """Read a file written by :meth:`save`; anything else is refused with a DataError (never unpickled)."""
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: retrieval results file not found")
        try:
            with safe_open(str(path), framework="pt", device="cpu") as handle:
                meta = handle.metadata() or {}
                if meta.get("format") != FORMAT:
                    raise DataError(
                        f"{path}: not gspdml retrieval results (format is {meta.get('format')!r})"
                    )
                if not meta.get("version", "").isdigit() or int(meta["version"]) > VERSION:
                    raise DataError(
                        f"{path}: results version {meta.get('version')!r}; this gspdml reads up to {VERSION}"
                    )
                missing = [name for name in _TENSORS if name not in handle.keys()]  # noqa: SIM118 (safe_open has keys(), no __contains__)
                if missing:
                    raise DataError(
                        f"{path}: retrieval results without tensor(s) {', '.join(missing)}"
                    )
                tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118 (safe_open is not iterable)
        except (SafetensorError, OSError) as err:
            raise DataError(
                f"{path}: not a gspdml retrieval results file (not safetensors: {err})"
            ) from None
        try:
            values = json.loads(meta["label_values"])
            label_values = np.asarray(values) if values else np.zeros(0, dtype=np.int64)
            return cls(
                **{name: tensors[name] for name in _TENSORS},
                label_values=label_values,
                excluded=tensors.get("excluded"),
                metric=meta["metric"],
                query_paths=json.loads(meta["query_paths"]),
                reference_paths=json.loads(meta["reference_paths"]),
            )
        except (KeyError, json.JSONDecodeError, ConfigError) as err:
            raise DataError(f"{path}: inconsistent retrieval results ({err})") from None


def relevant_counts(
    query_codes: torch.Tensor,
    reference_codes: torch.Tensor,
    num_labels: int,
    excluded: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """int64 [N_q]: R_i = references sharing query i's label, minus the excluded row when it does
    (0 for unknown labels)."""
    known = reference_codes[reference_codes != UNKNOWN]
    counts = torch.bincount(known, minlength=num_labels)
    q_known = query_codes != UNKNOWN
    out = torch.where(
        q_known,
        counts[query_codes.clamp(min=0)] if num_labels else torch.zeros_like(query_codes),
        0,
    )
    if excluded is not None:
        out = out - (q_known & (reference_codes[excluded] == query_codes)).to(torch.int64)
    return out


def drop_excluded(excluded: torch.Tensor, *columns: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``columns`` [n, k + 1] (the reference rows first) without each row's ``excluded`` reference,
    or without their last column where it is not among them: [n, k] each."""
    keep = columns[0] != excluded[:, None]
    keep[keep.all(1), -1] = False
    return tuple(column[keep].view(len(keep), column.shape[1] - 1) for column in columns)


def encode_labels(
    query_labels: LabelsLike, reference_labels: Optional[LabelsLike] = None
) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """One coding for both sides: ``(values [L], query codes [N_q], reference codes [N_r])``,
    int64 codes with ``values[code]`` the original label and -1 for None (``reference_labels``
    None: the queries only). Labels are ints, strings or bools; floats are refused, never
    rounded, and bools mixed with ints are refused, never coded as the ints 0 and 1 (True and 1
    together are most likely a bug: one class or two, the coding cannot know)."""
    arrays = [_as_label_array(query_labels, "query_labels")]
    if reference_labels is not None:
        arrays.append(_as_label_array(reference_labels, "reference_labels"))
    known = [
        np.array([v is not None for v in a], dtype=bool)
        if a.dtype == object
        else np.ones(len(a), bool)
        for a in arrays
    ]
    parts = [a[m] for a, m in zip(arrays, known)]
    kinds = set()
    for part in (p for p in parts if len(p)):
        kinds |= (
            {_label_kind(v) for v in part.tolist()}
            if part.dtype == object
            else {_LABEL_KINDS.get(part.dtype.kind, part.dtype.name)}
        )
    if kinds == {"bool", "int"}:
        raise ConfigError(
            "labels",
            "bool labels (True/False) mixed with integer labels: True and 1 would be scored as "
            "one class, or as two; give one kind of label (int() of each bool, or bools only)",
        )
    if len(kinds) > 1 or not kinds <= set(_LABEL_KINDS.values()):
        raise ConfigError(
            "labels",
            "labels must be all integers or all strings (or all bools), None where unknown; "
            f"got {', '.join(sorted(kinds))}",
        )
    parts = [np.asarray(p.tolist()) if p.dtype == object else p for p in parts if len(p)]
    if kinds == {"int"}:
        parts = _exact_integers(parts)
    present = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    values, inverse = np.unique(present, return_inverse=True)
    codes, start = [], 0
    for mask in known:
        code = np.full(len(mask), UNKNOWN, dtype=np.int64)
        code[mask] = inverse.reshape(-1)[start : start + int(mask.sum())]
        start += int(mask.sum())
        codes.append(torch.from_numpy(code))
    return values, codes[0], codes[-1]


def _exact_integers(parts: list[np.ndarray]) -> list[np.ndarray]:
    """Integer label arrays in one dtype that holds every value exactly: int64, else uint64.
    numpy promotes int64 and uint64 together to float64, which merges the ids above 2^53 (two
    classes scored as one)."""
    if all(p.dtype.kind != "u" or int(p.max()) <= np.iinfo(np.int64).max for p in parts):
        return [p.astype(np.int64) for p in parts]
    if all(p.dtype.kind == "u" or int(p.min()) >= 0 for p in parts):
        return [p.astype(np.uint64) for p in parts]
    raise ConfigError(
        "labels",
        "integer labels both below 0 and above 2^63 - 1: no integer type holds them all; give "
        "the labels as strings",
    )


def _as_label_array(labels: LabelsLike, name: str) -> np.ndarray:
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    arr = (
        np.array(labels, dtype=object)  # each value's own kind: np.asarray([True, 2]) is ints
        if isinstance(labels, (list, tuple)) and (None in labels or _holds_a_bool(labels))
        else np.asarray(labels)
    )
    if arr.ndim != 1:
        raise ConfigError(name, f"expected a 1-D array of labels, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind == "f":
        raise ConfigError(name, "labels must be integers or strings, not floats")
    return arr


def _holds_a_bool(labels: Sequence[Any]) -> bool:
    return any(isinstance(v, (bool, np.bool_)) for v in labels)


def _label_kind(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, str):
        return "str"
    return "bytes" if isinstance(value, bytes) else type(value).__name__
