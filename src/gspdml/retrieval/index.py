"""A persistent retrieval index: the embeddings of a gallery plus what they show.

On disk an index is a folder holding one generation of files (:mod:`gspdml.retrieval.generations`),
none of them ever unpickled:

* ``index.json``: ``{"format": "gspdml-index", "version": 1, "count", "dim", "metric",
  "model": {"run_dir", "weights"}, "paths": [...], "labels": [...]}``; ``model.weights`` is the
  sha256 of the run's ``model.safetensors``, so that queries and appended images are embedded
  by the model that built the index;
* ``vectors.safetensors``: one float32 tensor ``vectors [count, dim]``.

Search is exact (:mod:`gspdml.retrieval.exact_search`: faiss's flat index or a chunked torch
search, which rank identically), unless an approximate structure was built
(:meth:`RetrievalIndex.build_approximate`: faiss ``ivf``, ``ivfpq`` or ``hnsw``,
:mod:`gspdml.retrieval.ann`, with its recall measured against the exact engine) and
``exact=False``. Rows added later join it without retraining; removed rows make it rebuild
(:meth:`~RetrievalIndex.update_approximate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from gspdml.errors import MAX_JSON_BYTES, ConfigError, DataError, printable, read_json_object
from gspdml.evaluation.postprocess import postprocessed_search
from gspdml.evaluation.results import RetrievalResults, drop_excluded
from gspdml.output_files import json_text
from gspdml.retrieval import ann, exact_search, generations

FORMAT = "gspdml-index"
#: the backend name of exact search only (no approximate structure)
EXACT = "exact"
VERSION = 1
META_FILE = "index.json"
VECTORS_FILE = "vectors.safetensors"
#: the files at the top of an index folder written before manifests (removed by the next save)
LEGACY_FILES = (META_FILE, VECTORS_FILE, ann.ANN_FILE, ann.ANN_META)
#: the fix of a damaged index folder
REBUILD = generations.REBUILD
#: the most bytes a row adds to index.json: a path and a label of 4096 bytes each, every byte
#: written as a six-character escape, and the JSON around them
ROW_JSON_BYTES = 2 * 4096 * 6 + 64


@dataclass
class RetrievalIndex:
    """Gallery embeddings ``vectors [N, D]`` with one path and one label (or None) per row."""

    vectors: torch.Tensor
    paths: list[str]
    labels: list[Optional[str]]
    metric: str = "euclidean"
    model: dict[str, Any] = field(default_factory=dict)
    #: files left out by the last build or append (``{path: problem}``; not saved)
    skipped: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    #: the approximate search structure, or None (exact search only)
    approximate: Optional[ann.AnnIndex] = field(default=None, repr=False, compare=False)
    #: whether rows were removed since the approximate structure was built (it must be rebuilt)
    _removed: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.metric not in exact_search.METRICS:
            raise ConfigError(
                "metric",
                f"unknown metric {self.metric!r}; allowed: {', '.join(exact_search.METRICS)}",
            )
        self.vectors = self.vectors.detach().float().cpu().contiguous()
        self.paths, self.labels = list(self.paths), list(self.labels)
        if self.vectors.dim() != 2 or not (
            self.vectors.shape[0] == len(self.paths) == len(self.labels)
        ):
            raise ValueError(
                f"index needs vectors [N, D] with N paths and N labels; got {tuple(self.vectors.shape)}, "
                f"{len(self.paths)} paths, {len(self.labels)} labels"
            )

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def add(
        self, vectors: torch.Tensor, paths: Sequence[str], labels: Sequence[Optional[str]]
    ) -> None:
        """Append rows; old rows are kept as they are (never re-embedded)."""
        vectors = vectors.detach().float().cpu()
        if (
            vectors.dim() != 2
            or vectors.shape[1] != self.dim
            or vectors.shape[0] != len(paths)
            or len(paths) != len(labels)
        ):
            raise ValueError(
                f"cannot add vectors {tuple(vectors.shape)} with {len(paths)} paths to an index of dim {self.dim}"
            )
        self.vectors = torch.cat([self.vectors, vectors]).contiguous()
        self.paths += list(paths)
        self.labels += list(labels)

    def remove(self, rows: Sequence[int]) -> None:
        """Drop the given rows (positions); an approximate structure is rebuilt by the next
        :meth:`update_approximate`."""
        keep = sorted(set(range(len(self))) - set(rows))
        if len(keep) < len(self) and self.approximate is not None:
            self._removed = True
        self.vectors = self.vectors[keep].contiguous()
        self.paths = [self.paths[i] for i in keep]
        self.labels = [self.labels[i] for i in keep]

    def search(
        self,
        queries: torch.Tensor,
        k: int,
        query_paths: Optional[Sequence[str]] = None,
        query_labels: Optional[Sequence[Optional[str]]] = None,
        exclude: Optional[Sequence[int]] = None,
        backend: str = "auto",
        exact: bool = False,
        postprocess: Sequence[Any] = (),
        train: Optional[torch.Tensor] = None,
    ) -> RetrievalResults:
        """The ``k`` nearest index rows of each query, as :class:`RetrievalResults` with the
        index's paths and labels as references (distances in the index's metric).

        The approximate structure answers when there is one and ``exact`` is False; otherwise
        the exact engine (``backend``: ``auto``, ``torch`` or ``faiss`` candidates).
        ``exclude[q]``: a row to leave out of query q's results (leave-one-out).
        ``postprocess``: steps of :mod:`gspdml.evaluation.postprocess` applied to this search of
        the exact unit vectors (``train``: the embeddings PCA-whitening learns on); the distances
        are then squared Euclidean ones of the processed vectors, or d* after re-ranking.
        """
        n_queries = queries.shape[0]
        query_labels = list(query_labels) if query_labels is not None else [None] * n_queries
        extra = 1 if exclude is not None else 0
        if not 1 <= k <= len(self) - extra:
            raise ConfigError(
                "k",
                f"must be between 1 and {len(self) - extra} for this index of {len(self)} images, got {k}",
            )
        if n_queries == 0:  # nothing to search: empty results, not an engine's error
            distances = torch.empty(0, k + extra)
            indices = torch.empty(0, k + extra, dtype=torch.long)
        elif postprocess:
            found = postprocessed_search(
                queries, self.vectors, k=k + extra, steps=postprocess, train=train
            )
            distances, indices = (column[:, : k + extra] for column in found.neighbours)
        elif self.approximate is None or exact:
            distances, indices = exact_search.search(
                queries, self.vectors, k + extra, self.metric, backend
            )
        else:
            distances, indices = self._approximate_search(queries, k + extra, query_paths)
        excluded = None
        if exclude is not None:
            excluded = torch.as_tensor(list(exclude), dtype=torch.long)
            indices, distances = drop_excluded(excluded, indices, distances)
        return RetrievalResults.from_labels(
            indices,
            distances,
            query_labels,
            self.labels,
            excluded=excluded,
            metric="squared_euclidean" if postprocess else self.metric,
            query_paths=query_paths,
            reference_paths=self.paths,
        )

    # ------------------------------------------------------------------ approximate search
    def build_approximate(
        self,
        params: Union[ann.AnnParams, str],
        *,
        recall_k: int = ann.RECALL_K,
        recall_sample: int = ann.RECALL_SAMPLE,
    ) -> Optional[ann.AnnIndex]:
        """Build the approximate structure ``params`` (an :class:`~gspdml.retrieval.ann.AnnParams`,
        or a backend name with the default parameters) over the vectors and measure its
        recall@``recall_k`` on ``recall_sample`` held-out rows; ``"exact"`` drops it (None)."""
        if params == EXACT:
            self.approximate, self._removed = None, False
            return None
        params = ann.AnnParams(params) if isinstance(params, str) else params
        self.approximate = ann.build_measured(
            self._approximate_vectors(), params, recall_k, recall_sample
        )
        self._removed = False
        return self.approximate

    def tune_approximate(self, *, nprobe: Optional[int] = None, ef: Optional[int] = None) -> None:
        """Set the search knob of the approximate structure: ``nprobe`` (ivf, ivfpq: cells
        scanned per query) or ``ef`` (hnsw: candidates explored per query); None keeps it."""
        if nprobe is None and ef is None:
            return
        if self.approximate is None:
            raise ConfigError(
                "nprobe" if nprobe is not None else "ef",
                "this index has no approximate index (build one with build_approximate or "
                "gspdml index --backend)",
            )
        params = self.approximate.params
        nprobe, ef = params.nprobe if nprobe is None else nprobe, params.ef if ef is None else ef
        self.approximate.params = replace(params, nprobe=nprobe, ef=ef)

    def update_approximate(
        self, recall_k: int = ann.RECALL_K, recall_sample: int = ann.RECALL_SAMPLE
    ) -> Optional[ann.AnnIndex]:
        """Bring the approximate structure up to date with the rows: rebuilt with its parameters
        when rows were removed, else the added rows join it (no retraining); the recall is
        measured again. None when there is none."""
        found = self.approximate
        if found is None:
            return None
        if self._removed or found.count > len(self):
            return self.build_approximate(
                found.params, recall_k=recall_k, recall_sample=recall_sample
            )
        ann.append_measured(
            found, self._approximate_vectors(), len(self) - found.count, recall_k, recall_sample
        )
        return found

    def _approximate_vectors(self) -> torch.Tensor:
        """What the approximate structure holds: unit vectors for cosine, the vectors otherwise."""
        return F.normalize(self.vectors, dim=1) if self.metric == "cosine" else self.vectors

    def _approximate_search(
        self, queries: torch.Tensor, k: int, query_paths: Optional[Sequence[str]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        found = self.approximate
        assert found is not None  # search() calls it only then
        if self._removed or found.count != len(self):
            raise DataError(
                f"the approximate index holds {found.count} vectors, the index {len(self)}; "
                "rebuild it (update_approximate, or gspdml index --append)"
            )
        if self.metric == "cosine":
            queries = F.normalize(queries.float(), dim=1)
        squared, rows = ann.search(
            found.index, found.params, queries, k, vectors=self._approximate_vectors()
        )
        if (rows < 0).any():
            query = int((rows < 0).any(1).nonzero()[0, 0])
            name = query_paths[query] if query_paths is not None else f"#{query}"
            raise ConfigError(
                "nprobe",
                f"the approximate index found fewer than {k} neighbours for query {name}; "
                "raise nprobe (--nprobe) or search the exact vectors (--exact)",
            )
        distances = squared / 2.0 if self.metric == "cosine" else squared.clamp(min=0).sqrt()
        return distances.float(), rows

    def save(self, path: str | Path) -> None:
        """Write the folder as one new generation (:mod:`gspdml.retrieval.generations`): the
        vectors, the metadata and the approximate structure, then the manifest."""
        folder = Path(path)
        if folder.exists() and not folder.is_dir():
            raise DataError(f"{folder}: exists and is not an index folder")
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "count": len(self),
            "dim": self.dim,
            "metric": self.metric,
            "model": self.model,
            "paths": self.paths,
            "labels": self.labels,
        }
        writers = {
            VECTORS_FILE: lambda tmp: save_file(
                {"vectors": self.vectors}, tmp, metadata={"format": FORMAT, "version": str(VERSION)}
            ),
            META_FILE: lambda tmp: _write_json(tmp, meta),
        }
        approximate = self.approximate
        if approximate is not None:
            writers[ann.ANN_FILE] = approximate.write_faiss
            writers[ann.ANN_META] = lambda tmp: _write_json(tmp, approximate.description())
        generations.write_generation(folder, writers, legacy=LEGACY_FILES)

    @classmethod
    def load(cls, path: str | Path, mmap: bool = False) -> RetrievalIndex:
        """Read an index folder, with its approximate structure (``mmap``: mapped from the file,
        for searching only), its files checked against the manifest (size and sha256, ``ann.faiss``
        too, before faiss reads it)."""
        folder = Path(path)
        if folder.name in (META_FILE, generations.MANIFEST_FILE) and not folder.is_dir():
            folder = folder.parent
        for attempt in range(2):
            manifest = generations.read_manifest(folder)
            if manifest is None:  # written before manifests: the files at the top level
                return cls._read(folder, mmap)
            try:
                return cls._read(generations.verified_generation(folder, manifest), mmap)
            except DataError:  # a save may have committed a new generation meanwhile
                if attempt or generations.read_manifest(folder) == manifest:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _read(cls, folder: Path, mmap: bool) -> RetrievalIndex:
        """The index in the files of ``folder`` (a generation, or an index folder without
        manifest), checked for consistency."""
        not_index = (
            f"{folder}: not a gspdml index (expected a folder with {generations.MANIFEST_FILE}, "
            f"or {META_FILE} and {VECTORS_FILE})"
        )
        if not (folder / META_FILE).is_file() or not (folder / VECTORS_FILE).is_file():
            raise DataError(not_index)
        vectors = _read_vectors(folder / VECTORS_FILE)
        try:  # the one bounded reader of received JSON files, bounded by the rows stored
            bound = MAX_JSON_BYTES + ROW_JSON_BYTES * int(vectors.shape[0])
            meta = read_json_object(folder / META_FILE, max_bytes=bound)
        except DataError as err:
            raise DataError(f"{folder / META_FILE}: not a gspdml index ({err})") from None
        if meta.get("format") != FORMAT:
            raise DataError(
                f"{folder / META_FILE}: not a gspdml index (format is {meta.get('format')!r})"
            )
        if not isinstance(meta.get("version"), int) or meta["version"] > VERSION:
            raise DataError(
                f"{folder / META_FILE}: index version {meta.get('version')!r}; this gspdml reads up to {VERSION}"
            )
        count, dim = meta.get("count"), meta.get("dim")
        paths, labels = meta.get("paths"), meta.get("labels")
        if (
            tuple(vectors.shape) != (count, dim)
            or not isinstance(paths, list)
            or not isinstance(labels, list)
            or len(paths) != count
            or len(labels) != count
        ):
            raise DataError(
                f"{folder}: inconsistent index: vectors {tuple(vectors.shape)}, count {count!r}, dim {dim!r}, "
                f"{len(paths) if isinstance(paths, list) else paths!r} paths, "
                f"{len(labels) if isinstance(labels, list) else labels!r} labels"
            )
        _check_rows(folder, vectors, paths, labels)
        model = meta.get("model") or {}
        strings = ("weights", "run_dir", "run_dir_from_index")
        if not isinstance(model, dict) or any(
            not isinstance(model.get(key, ""), str) for key in strings
        ):
            raise DataError(
                f"{folder / META_FILE}: field 'model' must be an object whose {', '.join(strings)} "
                f"are strings, got {model!r:.200}"
            )
        approximate = ann.AnnIndex.load(folder, None, mmap=mmap)
        if approximate is not None and approximate.count > count:
            raise DataError(
                f"{folder}: the approximate index holds {approximate.count} vectors, "
                f"the index {count}; rebuild it (gspdml index --overwrite --backend ...)"
            )
        metric = meta.get("metric", "euclidean")
        if metric not in exact_search.METRICS:
            raise DataError(
                f"{folder / META_FILE}: field 'metric' is {json_text(metric)[:40]}; allowed: "
                f"{', '.join(exact_search.METRICS)}; {REBUILD}"
            )
        return cls(vectors, paths, labels, metric, model, approximate=approximate)


def _check_rows(folder: Path, vectors: torch.Tensor, paths: list[Any], labels: list[Any]) -> None:
    """Refuse a stored row whose vector is not finite (a search would fail on it later without
    naming the file), whose path is not a string or whose label is neither a string nor null."""
    for key, values, allowed in (("paths", paths, (str,)), ("labels", labels, (str, type(None)))):
        wrong = next((i for i, value in enumerate(values) if not isinstance(value, allowed)), None)
        if wrong is not None:
            raise DataError(
                f"{folder / META_FILE}: {key}[{wrong}] is {json_text(values[wrong])[:60]}, not "
                f"a {'file path' if key == 'paths' else 'class name or null'}; {REBUILD}"
            )
    finite = torch.isfinite(vectors).all(dim=1)
    if not bool(finite.all()):
        bad = (~finite).nonzero().flatten()
        raise DataError(
            f"{folder / VECTORS_FILE}: row {int(bad[0])} ({printable(paths[int(bad[0])])}) holds "
            f"NaN or infinite values ({len(bad)} of {len(paths)} rows); {REBUILD}"
        )


def holds_index(folder: str | Path) -> bool:
    """Whether ``folder`` holds an index (one with a manifest, or one written before them)."""
    return generations.holds_index(Path(folder), META_FILE)


def _write_json(path: str, value: Any) -> None:
    Path(path).write_text(json_text(value, indent=1), encoding="utf-8")


def _read_vectors(path: Path) -> torch.Tensor:
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            header = handle.metadata() or {}
            if header.get("format") != FORMAT or "vectors" not in handle.keys():  # noqa: SIM118 (safe_open has no __contains__)
                raise DataError(
                    f"{path}: a safetensors file, but not the vectors of a gspdml index"
                )
            vectors: torch.Tensor = handle.get_tensor("vectors")
    except (SafetensorError, OSError) as err:
        raise DataError(
            f"{path}: not a gspdml index vector file (not safetensors: {err})"
        ) from None
    if vectors.dtype != torch.float32 or vectors.dim() != 2:
        raise DataError(
            f"{path}: vectors must be float32 [count, dim], got {vectors.dtype} {tuple(vectors.shape)}"
        )
    return vectors
