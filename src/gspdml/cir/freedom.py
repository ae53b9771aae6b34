"""FreeDom: training-free composed image retrieval for domain conversion (Psomas thesis, chapter 4).

Notation of §4.3: f / g are the image / text encoders (ℓ2-normalised outputs),
y = f(y) the query image, t the query text (the target-domain name), V the vocabulary (text
memory, embeddings 𝒱 = g(V)), Z the visual memory (by default the database itself, §4.4.1).

* NN-inversion (Eq. 4.6):   φ_V(y) = g⁻¹(NN_m(f(y); g(V)))                     :func:`nn_inversion`
* expansion (Eqs. 4.13–4.14): k proxy images 𝒴 = NN_k(y; 𝒵), n words each W_j = g⁻¹(NN_n(y_j; 𝒱)),
  the m most frequent words Ŵ of the multiset ∪_j W_j with frequencies â     :func:`expanded_inversion`
* composition: early fusion β_E(W, t) = g(w_1 ⊕ … ⊕ w_m ⊕ t) (Eq. 4.10) or late fusion
  β_L(W, t, a) = Σ_i a_i g(w_i ⊕ t) (Eq. 4.12), ⊕ = space-joined string ("shark cartoon")
* similarity s(q, x) = h(y, t)ᵀ f(x) (Eq. 4.1); FreeDom = h_{L⁺α} (Eq. 4.17): expansion, late
  fusion, frequency weights. Defaults k = 20, n = 7 (§4.4.6), m = 7 (not stated in the text;
  it reproduces Tables 4.1 and 4.5 and is the code's default).

Where the official code (github.com/NikosEfth/freedom, ``calculate_rankings``) and the thesis text differ, this module
follows the code by default and says so:

1. *Query as its own proxy.* The thesis takes NN_k(y; 𝒵); with 𝒵 = the database the query is its
   own first neighbour (§4.4.6, "k = 1 corresponds to no expansion"). The code prepends the query
   (dropping the k-th neighbour) when a query is *not* in the memory (max similarity < 0.98) and
   decides that once for the whole batch. ``query_as_proxy="auto"`` (default) decides per query
   (a query's result then never depends on the other queries); ``"batch"`` reproduces the code;
   ``"never"`` is the thesis text literally; ``"always"`` always prepends.
2. *Weights.* The thesis uses the frequency â_i; the code uses count / max count
   (``weighting="count_max"``, default). Same ranking.
3. *Normalisation.* The thesis ℓ2-normalises h(q); the code does not (``renormalize=False``,
   default). Same ranking.
4. *Ties* among equally frequent words (unspecified in the thesis): first occurrence wins, in
   proxy order then word rank (the code's stable sort; the thesis leaves ties open). Nearest-neighbour ties
   (equal similarities) keep memory order.
5. Fewer than m distinct words (only when k·n is small): the code pads with zero-weight empty
   strings; here the missing entries are simply absent (same query vector).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from gspdml.data.textfiles import read_csv_records, read_text
from gspdml.errors import ConfigError, DataError

TextEncoder = Callable[[list[str]], torch.Tensor]

QUERY_AS_PROXY = ("auto", "batch", "never", "always")
WEIGHTINGS = ("count_max", "count", "uniform")
FUSIONS = ("late", "early")
IN_MEMORY_THRESHOLD = 0.98

# The ablation variants of Table 4.4 / §4.3.2 as constructor keyword arguments.
VARIANTS = {
    "single": dict(expansion=False, fusion="late", weighting="uniform", m=1),  # h_1, Eq. 4.7
    "E": dict(expansion=False, fusion="early", weighting="uniform"),  # h_E, Eq. 4.9
    "L": dict(expansion=False, fusion="late", weighting="uniform"),  # h_L, Eq. 4.11
    "E+": dict(expansion=True, fusion="early", weighting="uniform"),  # h_E+, Eq. 4.15
    "L+": dict(expansion=True, fusion="late", weighting="uniform"),  # h_L+, Eq. 4.16
    "L+a": dict(expansion=True, fusion="late", weighting="count_max"),  # h_L+α, Eq. 4.17 (FreeDom)
}


def check_choice(field: str, what: str, value: str, choices: Collection[str]) -> None:
    """ConfigError naming ``field`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(field, f"unknown {what} {value!r}; choose one of {', '.join(choices)}")


def read_vocabulary(path: str | Path) -> list[str]:
    """Words of a text memory: a ``.txt`` file with one word or phrase per line, or a ``.csv``
    whose ``DisplayName`` column (the Open Images class-description layout) or else first column
    holds them. Blank entries are skipped and duplicates dropped (first occurrence kept)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"vocabulary file not found: {path}")
    if path.suffix.lower() == ".csv":
        rows = [record for _, record in read_csv_records(path)]
        column = 0
        if rows and "DisplayName" in rows[0]:
            column = rows[0].index("DisplayName")
            rows = rows[1:]
        entries = [row[column] if len(row) > column else "" for row in rows]
    else:
        entries = read_text(path).splitlines()
    words = list(dict.fromkeys(entry.strip() for entry in entries if entry.strip()))
    if not words:
        raise DataError(f"{path}: vocabulary is empty")
    return words


def nearest(
    queries: torch.Tensor, memory: torch.Tensor, count: int, block_elements: int = 1 << 22
) -> torch.Tensor:
    """Indices ``[Q, count]`` of the ``count`` most similar memory rows (cosine, descending);
    equal similarities keep memory order, also at the cut-off — the same result as a stable full
    sort (``np.argsort(-s, kind="stable")[:count]``) at the cost of a top-k. Queries are processed
    in blocks of about ``block_elements`` similarities (a 20k-word vocabulary stays small)."""
    if not 1 <= count <= memory.shape[0]:
        raise ConfigError(
            "k", f"asked for {count} neighbours but the memory holds {memory.shape[0]} items"
        )
    rows = max(1, block_elements // memory.shape[0])
    return torch.cat(
        [
            _nearest_block(queries[i : i + rows], memory, count)
            for i in range(0, queries.shape[0], rows)
        ]
    )


def _nearest_block(queries: torch.Tensor, memory: torch.Tensor, count: int) -> torch.Tensor:
    similarity = queries @ memory.T
    kth = torch.topk(similarity, count, dim=1).values[:, -1:]
    above, tied = similarity > kth, similarity == kth
    room = count - above.sum(dim=1, keepdim=True)  # tied rows that still fit, first ones first
    chosen = above | (tied & (tied.cumsum(dim=1) <= room))
    indices = chosen.nonzero(as_tuple=True)[1].reshape(-1, count)  # ascending memory order per row
    values = torch.gather(similarity, 1, indices)
    return torch.gather(indices, 1, torch.sort(-values, dim=1, stable=True).indices)


@dataclass
class TextMemory:
    """A vocabulary and its ℓ2-normalised text embeddings g(V) ``[len(words), D]`` (Eq. 4.3),
    every word embedded as raw text, no prompt template (as the authors' code does)."""

    words: list[str]
    embeddings: torch.Tensor

    def __post_init__(self) -> None:
        if self.embeddings.ndim != 2 or self.embeddings.shape[0] != len(self.words):
            raise ConfigError(
                "vocabulary",
                f"{len(self.words)} words but embeddings of shape {tuple(self.embeddings.shape)}",
            )


@dataclass
class TextLabels:
    """The text labels of one query image with their late-fusion weights a."""

    words: list[str]
    weights: list[float] = field(default_factory=list)


def vote(
    word_indices: torch.Tensor, m: int, weighting: str = "count_max"
) -> tuple[list[int], list[float]]:
    """The m most frequent entries of the ordered multiset ``word_indices`` (proxy-major, then word
    rank) and their weights: count / max count, count, or 1. Ties: first occurrence first."""
    check_choice("weighting", "weighting", weighting, WEIGHTINGS)
    flat = word_indices.reshape(-1)
    unique, inverse, counts = torch.unique(flat, return_inverse=True, return_counts=True)
    positions = torch.arange(flat.numel(), device=flat.device)
    first = torch.full_like(unique, flat.numel()).scatter_reduce(
        0, inverse, positions, reduce="amin"
    )
    key = -counts * (flat.numel() + 1) + first  # by count descending, then first occurrence
    chosen = torch.argsort(key)[:m]
    chosen_counts = counts[chosen].to(torch.float64)
    if weighting == "count_max":
        weights = chosen_counts / chosen_counts.max()
    elif weighting == "count":
        weights = chosen_counts
    else:
        weights = torch.ones_like(chosen_counts)
    return unique[chosen].tolist(), weights.tolist()


def proxy_indices(
    queries: torch.Tensor,
    memory: torch.Tensor,
    k: int,
    query_as_proxy: str = "auto",
    threshold: float = IN_MEMORY_THRESHOLD,
) -> torch.Tensor:
    """Memory indices ``[Q, k]`` of the k proxy images of every query (Eq. 4.13), with ``-1``
    standing for the query itself where the code's rule prepends it (module docstring, item 1)."""
    check_choice("query_as_proxy", "rule", query_as_proxy, QUERY_AS_PROXY)
    if k < 1:
        raise ConfigError("k", f"must be >= 1, got {k}")
    neighbours = nearest(queries, memory, k)
    # max similarity to the memory
    outside = (queries * memory[neighbours[:, 0]]).sum(dim=-1) < threshold
    if query_as_proxy == "never":
        prepend = torch.zeros_like(outside)
    elif query_as_proxy == "always":
        prepend = torch.ones_like(outside)
    elif query_as_proxy == "batch":
        prepend = outside.any().expand_as(outside)
    else:
        prepend = outside
    with_query = torch.cat([torch.full_like(neighbours[:, :1], -1), neighbours[:, : k - 1]], dim=1)
    return torch.where(prepend[:, None], with_query, neighbours)


def nn_inversion(queries: torch.Tensor, text_memory: TextMemory, m: int) -> list[TextLabels]:
    """φ_V(y) (Eq. 4.6): the m nearest vocabulary words of each query, uniform weights."""
    indices = nearest(queries, text_memory.embeddings, m)
    return [TextLabels([text_memory.words[i] for i in row], [1.0] * m) for row in indices.tolist()]


def expanded_inversion(
    queries: torch.Tensor,
    visual_memory: torch.Tensor,
    text_memory: TextMemory,
    k: int = 20,
    n: int = 7,
    m: int = 7,
    weighting: str = "count_max",
    query_as_proxy: str = "auto",
    memory_words: Optional[dict[int, list[int]]] = None,
) -> list[TextLabels]:
    """φ⁺_{X,V}(y) (Eqs. 4.13–4.14) with frequency weights â (Eq. 4.17).

    The n words of a memory image do not depend on the query, so they are looked up once per
    memory image and kept in ``memory_words`` (``{memory index: word indices}``) when given —
    with the database as memory that divides the vocabulary search by up to k."""
    proxies = proxy_indices(queries, visual_memory, k, query_as_proxy)  # [Q, k], -1 = the query
    memory_words = {} if memory_words is None else memory_words
    missing = sorted(set(proxies[proxies >= 0].tolist()) - set(memory_words))
    if missing:
        found = nearest(visual_memory[missing], text_memory.embeddings, n).tolist()
        memory_words.update(zip(missing, found))
    own = {}
    itself = (proxies < 0).any(dim=1).nonzero(as_tuple=True)[0].tolist()
    if itself:
        own = dict(zip(itself, nearest(queries[itself], text_memory.embeddings, n).tolist()))
    labels = []
    for row, indices in enumerate(proxies.tolist()):
        # proxy-major, then word rank
        words = [w for j in indices for w in (own[row] if j < 0 else memory_words[j])]
        chosen, weights = vote(torch.tensor(words), m, weighting)
        labels.append(TextLabels([text_memory.words[i] for i in chosen], weights))
    return labels


class TextEmbeddingMemo:
    """Embeds strings once: composed texts repeat across queries ("shark cartoon"), so the text
    encoder runs once per unique string ("cache g(word domain)")."""

    def __init__(self, encode_text: TextEncoder, batch_size: int = 256):
        self.encode_text, self.batch_size = encode_text, int(batch_size)
        self._rows: dict[str, torch.Tensor] = {}

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        missing = list(dict.fromkeys(t for t in texts if t not in self._rows))
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start : start + self.batch_size]
            for text, row in zip(chunk, self.encode_text(chunk)):
                self._rows[text] = row
        return torch.stack([self._rows[t] for t in texts])


def compose(
    labels: Sequence[TextLabels],
    targets: Sequence[str],
    encode_text: TextEncoder,
    fusion: str = "late",
    renormalize: bool = False,
) -> torch.Tensor:
    """Composed queries h(y, t) ``[Q, D]``: β_L (Eq. 4.12) or β_E (Eq. 4.10) per query."""
    check_choice("fusion", "fusion", fusion, FUSIONS)
    if len(labels) != len(targets):
        raise ConfigError("targets", f"{len(labels)} queries but {len(targets)} target texts")
    rows = []
    for label, target in zip(labels, targets):
        if fusion == "early":
            rows.append(encode_text([" ".join([*label.words, target])])[0])
        else:
            embedded = encode_text([f"{word} {target}" for word in label.words])
            weights = torch.tensor(label.weights, dtype=embedded.dtype, device=embedded.device)
            rows.append(weights @ embedded)
    queries = torch.stack(rows)
    return torch.nn.functional.normalize(queries, dim=-1) if renormalize else queries


class FreeDom:
    """Composed encoder h(y, t) of FreeDom and its ablation variants (see :data:`VARIANTS`).

    ``encode_text(list[str]) -> [N, D]`` must return ℓ2-normalised rows; its results are
    memoised per string. ``visual_memory`` (``[M, D]``, ℓ2-normalised) is the database by default
    (§4.4.1); an external image set, or its union with the database, is the alternative of
    Table 4.5 (``gspdml cir freedom --memory``).
    """

    def __init__(
        self,
        encode_text: TextEncoder,
        text_memory: TextMemory,
        visual_memory: Optional[torch.Tensor] = None,
        k: int = 20,
        n: int = 7,
        m: int = 7,
        weighting: str = "count_max",
        fusion: str = "late",
        expansion: bool = True,
        query_as_proxy: str = "auto",
        renormalize: bool = False,
    ):
        for name, value in (("k", k), ("n", n), ("m", m)):
            if int(value) < 1:
                raise ConfigError(name, f"must be >= 1, got {value}")
        check_choice("weighting", "weighting", weighting, WEIGHTINGS)
        check_choice("fusion", "fusion", fusion, FUSIONS)
        if expansion and visual_memory is None:
            raise ConfigError(
                "visual_memory",
                "expanded inversion needs a visual memory (usually the database embeddings)",
            )
        self.encode_text = TextEmbeddingMemo(encode_text)
        self.text_memory, self.visual_memory = text_memory, visual_memory
        self.k, self.n, self.m = int(k), int(n), int(m)
        self.weighting, self.fusion, self.expansion = weighting, fusion, bool(expansion)
        self.query_as_proxy, self.renormalize = query_as_proxy, bool(renormalize)
        # n words of each memory image, filled on demand
        self._memory_words: dict[int, list[int]] = {}

    @classmethod
    def variant(
        cls,
        name: str,
        encode_text: TextEncoder,
        text_memory: TextMemory,
        visual_memory: Optional[torch.Tensor] = None,
        **overrides: Any,
    ) -> FreeDom:
        """One of the ablation variants by name: ``single``, ``E``, ``L``, ``E+``, ``L+``, ``L+a``."""
        check_choice("variant", "FreeDom variant", name, VARIANTS)
        return cls(encode_text, text_memory, visual_memory, **{**VARIANTS[name], **overrides})

    def invert(self, image_queries: torch.Tensor) -> list[TextLabels]:
        """The text labels (and weights) of each query image ``[Q, D]``; a query image that
        occurs several times (one row per target text) is inverted once."""
        unique, inverse = torch.unique(image_queries, dim=0, return_inverse=True)
        if self.expansion and self.visual_memory is not None:  # __init__: expansion has one
            labels = expanded_inversion(
                unique,
                self.visual_memory,
                self.text_memory,
                self.k,
                self.n,
                self.m,
                self.weighting,
                self.query_as_proxy,
                self._memory_words,
            )
        else:  # every word occurs once, so all weightings are uniform
            labels = nn_inversion(unique, self.text_memory, self.m)
        return [labels[i] for i in inverse.tolist()]

    def query_embeddings(self, image_queries: torch.Tensor, targets: Sequence[str]) -> torch.Tensor:
        """h(y, t) ``[Q, D]`` for query images ``[Q, D]`` and their target texts."""
        if image_queries.ndim != 2 or image_queries.shape[0] != len(targets):
            raise ConfigError(
                "targets", f"{image_queries.shape[0]} query images but {len(targets)} target texts"
            )
        return compose(
            self.invert(image_queries), targets, self.encode_text, self.fusion, self.renormalize
        )

    def scores(
        self, image_queries: torch.Tensor, targets: Sequence[str], database: torch.Tensor
    ) -> torch.Tensor:
        """s(q, x) = h(y, t)ᵀ f(x) (Eq. 4.1), ``[Q, N]``."""
        return self.query_embeddings(image_queries, targets) @ database.T
