"""Approximate nearest-neighbour search (faiss) that states how approximate it is.

Three faiss structures, all on squared Euclidean distance (cosine indexes store unit vectors,
for which ``||q - g||^2 = 2 - 2 cos(q, g)`` ranks alike):

* ``ivf``: inverted file, flat codes (``IndexIVFFlat``; Jégou, Douze & Schmid, "Product
  quantization for nearest neighbor search", TPAMI 2011, §4): k-means splits the space into
  ``nlist`` cells; a query scans the vectors of its ``nprobe`` nearest cells exactly.
* ``ivfpq``: the same inverted file with product-quantised residuals (same paper, §3-4): each
  vector costs ``pq_m`` bytes; distances are approximate (asymmetric distance computation), so
  the shortlist of ``rerank`` x k candidates is re-ranked by the exact engine
  (:func:`gspdml.evaluation.exact_knn.exact_squared_distances`) on the stored float32 vectors.
* ``hnsw``: hierarchical navigable small-world graph (Malkov & Yashunin, TPAMI 2020), ``ef``
  candidates explored per query.

Recall is measured, never assumed: :func:`measure_recall` takes ``sample`` indexed vectors that
were kept out of the quantiser's training, searches each of them in the approximate index and
with the exact engine (:func:`gspdml.evaluation.exact_knn.knn`) with its own row excluded, and reports

    recall@k = (1 / |S|) sum_{q in S} |A_k(q) ∩ E_k(q)| / k

with A_k the approximate and E_k the exact k nearest rows (faiss's "k-recall@k" intersection
measure). The value is stored next to the index with the search parameter it was measured at.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch

from gspdml.errors import ConfigError, DataError, import_optional, read_json_object
from gspdml.evaluation.exact_knn import exact_squared_distances, knn
from gspdml.evaluation.results import drop_excluded
from gspdml.output_files import atomic_write, atomic_write_text, json_text

BACKENDS = ("ivf", "ivfpq", "hnsw")
ANN_FILE = "ann.faiss"
ANN_META = "ann.json"
FORMAT = "gspdml-ann"
_ADD_CHUNK = 1 << 18
#: recall@k measured at each build or append: its k and its number of held-out sample rows
RECALL_K = 10
RECALL_SAMPLE = 1000
#: vectors faiss reads: a tensor (any device), a numpy array or memmap (read by chunks)
Vectors = Union[torch.Tensor, np.ndarray]
# faiss's inverted-file search splits the queries over threads and runs the coarse quantiser's
# BLAS product inside each slice (parallel_mode 0, its default); with the faiss wheels on 2 threads
# that nesting is up to 7x slower at fine cells than mode 3, which runs the quantiser on all
# queries first and then splits the cell scans over the queries (same neighbours;
# benchmarks/ivf_parallel_mode.py).
_IVF_PARALLEL_MODE = 3


@dataclass
class AnnParams:
    """Build and search parameters; ``None`` sizes chosen from the number of vectors N."""

    backend: str
    nlist: Optional[int] = None  # ivf / ivfpq: cells, default ~4 sqrt(N) (power of two)
    train_per_list: int = 64  # ivf / ivfpq: k-means training vectors per cell
    kmeans_iters: int = 25  # ivf / ivfpq: k-means iterations (faiss's default)
    pq_m: Optional[int] = None  # ivfpq: sub-quantisers (bytes per vector), default D / 4
    hnsw_m: int = 32  # hnsw: graph degree
    ef_construction: int = 80  # hnsw: candidates while building
    nprobe: int = 16  # ivf / ivfpq: cells scanned per query
    ef: int = 64  # hnsw: candidates explored per query
    rerank: int = 4  # ivfpq: exact re-ranking of rerank * k PQ candidates
    seed: int = 0

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(
                "--backend",
                f"unknown approximate backend {self.backend!r}; allowed: {', '.join(BACKENDS)}",
            )
        positive = ("train_per_list", "kmeans_iters", "hnsw_m", "ef_construction", "nprobe", "ef")
        for name in (*positive, "rerank"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(
                    f"--{name.replace('_', '-')}", f"must be >= 1, got {getattr(self, name)}"
                )

    def search_setting(self) -> dict[str, int]:
        """The knob that trades speed for recall, as stored with a recall value."""
        if self.backend == "hnsw":
            return {"ef": self.ef}
        setting = {"nprobe": self.nprobe}
        if self.backend == "ivfpq":
            setting["rerank"] = self.rerank
        return setting


def _faiss() -> Any:
    return import_optional(
        "faiss", "--backend", "approximate indexes need faiss: pip install gspdml[faiss]"
    )


def _host(vectors: Vectors) -> np.ndarray:
    """``vectors`` as faiss reads them: a tensor (on any device) as a CPU numpy array, anything
    else (a numpy array or memmap, read by chunks later) as given."""
    return vectors.detach().cpu().numpy() if isinstance(vectors, torch.Tensor) else vectors


def _as_float32(vectors: Vectors) -> np.ndarray:
    return np.ascontiguousarray(_host(vectors), dtype=np.float32)


def default_nlist(n: int) -> int:
    """A power of two near 4 sqrt(N), with at least 39 training vectors per cell available."""
    nlist: int = 1 << max(0, round(np.log2(4.0 * np.sqrt(max(n, 1)))))
    while nlist > 1 and nlist * 39 > n:
        nlist //= 2
    return nlist


def build(vectors: Vectors, params: AnnParams, train_rows: Optional[np.ndarray] = None) -> Any:
    """A faiss index holding every row of ``vectors`` [N, D] (ids = row numbers); quantisers
    (ivf, ivfpq) trained by ``kmeans_iters`` rounds of k-means on at most ``train_per_list``
    vectors per cell of ``train_rows`` (default all; a held-out sample stays out). Training costs
    nlist² x train_per_list x kmeans_iters."""
    faiss = _faiss()
    x = _host(vectors)  # may be a memmap: read by chunks
    n, dim = x.shape
    if params.backend == "hnsw":
        index = faiss.IndexHNSWFlat(dim, params.hnsw_m)
        index.hnsw.efConstruction = params.ef_construction
    else:
        pool = np.arange(n) if train_rows is None else np.asarray(train_rows)
        nlist = params.nlist or default_nlist(len(pool))
        if not 1 <= nlist <= len(pool):
            raise ConfigError(
                "--nlist",
                f"must be between 1 and the number of training vectors {len(pool)}, got {nlist}",
            )
        params.nlist = nlist
        quantizer = faiss.IndexFlatL2(dim)
        if params.backend == "ivf":
            index = faiss.IndexIVFFlat(quantizer, dim, nlist)
        else:
            pq_m = params.pq_m or max(1, dim // 4)
            if dim % pq_m:
                raise ConfigError("--pq-m", f"must divide the dimension {dim}, got {pq_m}")
            params.pq_m = pq_m
            index = faiss.IndexIVFPQ(quantizer, dim, nlist, pq_m, 8)
        index.cp.seed = params.seed
        index.cp.niter = params.kmeans_iters
        cp = index.cp  # the sample below is all faiss trains on: no further subsampling
        cp.max_points_per_centroid = params.train_per_list
        cp.min_points_per_centroid = min(cp.min_points_per_centroid, params.train_per_list)
        rng = np.random.default_rng(params.seed)
        sample = np.sort(
            rng.choice(pool, min(len(pool), nlist * params.train_per_list), replace=False)
        )
        with _gpu_clustering(faiss, index, dim):
            index.train(_as_float32(x[sample]))
        index.quantizer_trains_alone = 0
    add(index, x)
    return index


@contextlib.contextmanager
def _gpu_clustering(faiss: Any, index: Any, dim: int) -> Iterator[None]:
    """With faiss-gpu and a visible GPU, the quantiser's k-means assigns its training vectors on
    every GPU (``clustering_index``, the costly part of training); the index stays a CPU index,
    saved, memory-mapped and appended as before. Without a GPU nothing changes."""
    if faiss.get_num_gpus() == 0:
        yield
        return
    flat = faiss.index_cpu_to_all_gpus(faiss.IndexFlatL2(dim))  # kept alive while faiss uses it
    index.clustering_index = flat
    try:
        yield
    finally:
        index.clustering_index = None


def add(index: Any, vectors: Vectors) -> None:
    """Append rows (ids continue the row numbering), read and added by chunks; the quantiser is
    not retrained."""
    x = _host(vectors)
    for start in range(0, len(x), _ADD_CHUNK):
        index.add(_as_float32(x[start : start + _ADD_CHUNK]))


def configure(index: Any, params: AnnParams) -> None:
    """Apply the search knob (nprobe or ef) of ``params`` to ``index``."""
    faiss = _faiss()
    if params.backend == "hnsw":
        faiss.downcast_index(index).hnsw.efSearch = params.ef
    else:
        ivf = faiss.extract_index_ivf(index)
        ivf.nprobe = params.nprobe
        ivf.parallel_mode = _IVF_PARALLEL_MODE


def search(
    index: Any, params: AnnParams, queries: Vectors, k: int, vectors: Optional[Vectors] = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(squared distances [Q, k] float64, rows [Q, k] int64)`` from the approximate index;
    ``ivfpq``'s ``rerank * k`` candidates re-ranked exactly against ``vectors`` (then required)."""
    configure(index, params)
    q = _as_float32(queries)
    k = min(k, index.ntotal)
    if params.backend != "ivfpq":
        dist, rows = index.search(q, k)
        return torch.from_numpy(dist).double(), torch.from_numpy(rows)
    if vectors is None:
        raise ValueError("ivfpq search re-ranks its candidates and needs the stored vectors")
    _, cand = index.search(q, min(index.ntotal, params.rerank * k))
    cand = torch.from_numpy(cand)
    missing = cand < 0  # fewer candidates than asked in the probed cells
    ref = torch.from_numpy(_host(vectors))
    exact = exact_squared_distances(torch.from_numpy(q), ref, cand.clamp(min=0))
    exact[missing] = float("inf")
    order = torch.argsort(exact, dim=1, stable=True)[:, :k]
    rows = cand.gather(1, order)
    dist = exact.gather(1, order)
    rows[torch.isinf(dist)] = -1
    return dist, rows


def measure_recall(
    index: Any, params: AnnParams, vectors: Vectors, rows: np.ndarray, k: int
) -> dict[str, Any]:
    """recall@k of ``index`` on the indexed vectors ``rows`` used as queries, each with its own
    row excluded, against the exact engine (module docstring)."""
    x = torch.as_tensor(_as_float32(vectors))
    sample = torch.as_tensor(np.asarray(rows), dtype=torch.long)
    k = min(int(k), len(x) - 1)
    if k < 1 or not len(sample):
        raise ConfigError(
            "--recall-sample",
            f"recall needs at least 2 indexed vectors and 1 sample, got {len(x)} and {len(sample)}",
        )
    queries = x[sample]
    _, exact = knn(queries, x, k + 1)
    _, approx = search(index, params, queries, k + 1, vectors=x)
    (exact,), (approx,) = drop_excluded(sample, exact), drop_excluded(sample, approx)
    hits = (approx[:, :, None] == exact[:, None, :]).any(2) & (approx >= 0)
    return {
        "k": k,
        "recall": float(hits.sum(1).double().div(k).mean()),
        "sample": len(sample),
        **params.search_setting(),
    }


def held_out(n: int, sample: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(sample rows, training rows)``: a random sample of N rows and the rest."""
    sample = min(int(sample), max(0, n - 1))
    rng = np.random.default_rng(seed + 1)
    chosen = np.sort(rng.choice(n, sample, replace=False))
    mask = np.ones(n, dtype=bool)
    mask[chosen] = False
    return chosen, np.flatnonzero(mask)


# --- on disk: ann.faiss + ann.json inside an index folder -------------------------------------


@dataclass
class AnnIndex:
    """A faiss index over the rows of a :class:`~gspdml.retrieval.index.RetrievalIndex`, its
    parameters and the recall measured at its last build or append."""

    index: Any  # a faiss index
    params: AnnParams
    recall: dict[str, Any]
    mmap: bool = False

    @property
    def count(self) -> int:
        return int(self.index.ntotal)

    def describe(self) -> str:
        setting = ", ".join(f"{key} {value}" for key, value in self.params.search_setting().items())
        knobs = ("nprobe", "ef", "rerank")
        measured = ", ".join(f"{key} {value}" for key, value in self.recall.items() if key in knobs)
        line = (
            f"approximate search ({self.params.backend}, {setting}): recall@{self.recall['k']} = "
            f"{self.recall['recall']:.4f} against exact search, measured on {self.recall['sample']} held-out "
            f"indexed vectors at {measured}"
        )
        if setting != measured:
            line += " (this search uses other settings: recall not measured for them)"
        return line

    def description(self) -> dict[str, Any]:
        """What ``ann.json`` holds: the parameters, the vector count and the measured recall."""
        return {
            "format": FORMAT,
            "version": 1,
            "count": self.count,
            "params": asdict(self.params),
            "recall": self.recall,
        }

    def write_faiss(self, path: str | Path) -> None:
        """Write the faiss structure (``ann.faiss``) to ``path``."""
        _faiss().write_index(self.index, str(path))

    def save(self, folder: str | Path) -> None:
        """Write ``ann.faiss`` and ``ann.json`` into ``folder``, each atomically."""
        folder = Path(folder)
        atomic_write(folder / ANN_FILE, self.write_faiss)
        atomic_write_text(folder / ANN_META, json_text(self.description(), indent=1))

    @classmethod
    def load(
        cls, folder: str | Path, count: Optional[int], mmap: bool = True
    ) -> Optional[AnnIndex]:
        """The approximate index of an index folder, or None; ``count``: the vectors it must hold
        (None: any); ``mmap`` maps the file instead of reading it (not for appending). faiss
        trusts the sizes the file claims: :meth:`RetrievalIndex.load
        <gspdml.retrieval.index.RetrievalIndex.load>` checks it against the manifest's size and
        sha256 before calling this, mapped or not."""
        folder = Path(folder)
        described = read_description(folder)
        if described is None:
            return None
        meta, params, recall = described
        faiss = _faiss()
        flags = faiss.IO_FLAG_MMAP if mmap else 0
        try:
            index = faiss.read_index(str(folder / ANN_FILE), flags)
        except RuntimeError as err:
            raise DataError(
                f"{folder / ANN_FILE}: cannot read the faiss index ({str(err).splitlines()[0]})"
            ) from None
        expected = meta.get("count") if count is None else count
        if index.ntotal != expected or meta.get("count") != expected:
            raise DataError(
                f"{folder}: the approximate index holds {index.ntotal} vectors, the "
                f"index {expected}; rebuild it"
            )
        return cls(index, params, recall, mmap)


def read_description(
    folder: Path,
) -> Optional[tuple[dict[str, Any], AnnParams, dict[str, Any]]]:
    """``(meta, params, recall)`` of the approximate index described in ``folder``, or None."""
    if not (folder / ANN_META).is_file():
        return None
    try:
        meta = read_json_object(folder / ANN_META)  # bounded: size, nesting
        return meta, AnnParams(**meta["params"]), dict(meta["recall"])
    except (DataError, ValueError, KeyError, TypeError) as err:
        raise DataError(
            f"{folder / ANN_META}: not a gspdml approximate-index description ({err})"
        ) from None


def build_measured(
    vectors: Vectors, params: AnnParams, k: int = RECALL_K, sample: int = RECALL_SAMPLE
) -> AnnIndex:
    """Build an approximate index over ``vectors`` and measure its recall@k on a held-out sample."""
    rows, train_rows = held_out(len(vectors), sample, params.seed)
    index = build(vectors, params, train_rows)
    return AnnIndex(index, params, measure_recall(index, params, vectors, rows, k))


def append_measured(ann: AnnIndex, vectors: Vectors, new_rows: int, k: int, sample: int) -> None:
    """Add the last ``new_rows`` rows of ``vectors`` and re-measure the recall on all of them."""
    if new_rows:
        add(ann.index, vectors[len(vectors) - new_rows :])
    rows, _ = held_out(len(vectors), sample, ann.params.seed)
    ann.recall = measure_recall(ann.index, ann.params, vectors, rows, k)
