"""One composed-image-retrieval evaluation, the one pipeline of ``gspdml cir freedom|weicom`` and
of the CIR tables of ``gspdml reproduce``: embed the database and the query images
(:func:`protocol_features`), build the method's score function s(q, x) (:func:`score_function`)
and rank the whole database for every query (:func:`evaluate_cir`).

Methods (:class:`CirMethod`): FreeDom and its ablation variants (Psomas thesis §4.3, Eq. 4.17),
WeiCom with text weight λ (Eq. 5.2) and the baselines (§4.4.2, Eq. 5.1). FreeDom's visual memory
Z (Eq. 4.13) is the database, an external memory, or both (Table 4.5; :func:`visual_memory`); its
``oracle`` setting injects a ground-truth word into the text labels (§4.4.7, Table 4.6;
:mod:`gspdml.cir.oracle`). The generic benchmarks of Table 4.7
(:mod:`gspdml.cir.generic_datasets`) rank with their excluded images removed and add their
official metrics (:func:`~gspdml.cir.generic_metrics.evaluate_generic`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from gspdml.data.images import IMAGE_EXTENSIONS
from gspdml.errors import ConfigError, DataError

from .baselines import BASELINES, baseline_scores
from .composition_protocol import CompositionProtocol, ScoreFunction, evaluate_protocol
from .features import FeatureCache, encode_image_files, encode_texts
from .freedom import (
    QUERY_AS_PROXY,
    VARIANTS,
    FreeDom,
    TextEmbeddingMemo,
    TextMemory,
    check_choice,
    read_vocabulary,
)
from .generic_datasets import GenericProtocol
from .generic_metrics import evaluate_generic
from .oracle import ORACLES, add_oracle_change, oracle_scores, oracle_words
from .vl_model import VisionLanguageEncoder
from .weicom import FALLBACK_LAMBDA, default_lambda

#: every method a :class:`CirMethod` may name
METHODS = ("freedom", "weicom", *BASELINES)


@dataclass(frozen=True)
class CirMethod:
    """How a composed query (image y, text t) scores a database image x. ``name`` is one of
    :data:`METHODS`; FreeDom's ``variant``, ``k`` proxy images, ``n`` words per proxy, ``m``
    text labels (None: the variant's, 7) and ``query_as_proxy`` rule (:mod:`gspdml.cir.freedom`);
    WeiCom's text weight ``lam`` (λ of Eq. 5.2); FreeDom's ``oracle`` (``none``, ``object``:
    the query's class name added to the labels, ``domain``: its source domain's name added;
    §4.4.7, :mod:`gspdml.cir.oracle`)."""

    name: str = "freedom"
    variant: str = "L+a"
    k: int = 20
    n: int = 7
    m: Optional[int] = None
    query_as_proxy: str = "auto"
    lam: float = 0.5
    oracle: str = "none"

    def __post_init__(self) -> None:
        check_choice("method", "method", self.name, METHODS)
        check_choice("variant", "FreeDom variant", self.variant, VARIANTS)
        check_choice("query_as_proxy", "rule", self.query_as_proxy, QUERY_AS_PROXY)
        if self.oracle not in ORACLES or (self.oracle != "none" and self.name != "freedom"):
            raise ConfigError(
                "oracle",
                f"unknown oracle {self.oracle!r} for {self.name}; FreeDom's are {', '.join(ORACLES)}",
            )
        if not 0.0 <= self.lam <= 1.0:
            raise ConfigError("lambda", f"WeiCom's text weight must lie in [0, 1], got {self.lam}")

    @property
    def labels_kept(self) -> int:
        """FreeDom's m as used: ``m``, else the variant's (1 for ``single``), else 7."""
        if self.m is not None:
            return self.m
        variant_m = VARIANTS[self.variant].get("m", 7)
        return variant_m if isinstance(variant_m, int) else 7


def cir_method(
    command: str,
    name: str,
    model: str,
    lam: Optional[float] = None,
    variant: str = CirMethod.variant,
    k: int = CirMethod.k,
    n: int = CirMethod.n,
    m: Optional[int] = None,
    query_as_proxy: str = CirMethod.query_as_proxy,
    oracle: str = CirMethod.oracle,
) -> CirMethod:
    """The method ``gspdml cir COMMAND --method NAME`` runs with the model ``model``, WeiCom's
    ``lam`` and FreeDom's settings. WeiCom's λ defaults to the model's (Psomas thesis Table 5.2,
    :func:`default_lambda`) and, as the chapter-4 competitor of ``cir freedom``, to 0.5 (the two
    CDFs summed, §4.4.4); the other methods keep :class:`CirMethod`'s."""
    if name != "weicom":
        lam = CirMethod.lam
    elif lam is None:
        lam = FALLBACK_LAMBDA if command == "freedom" else default_lambda(model)
    return CirMethod(name, variant, k, n, m, query_as_proxy, lam, oracle)


def require_memories(
    method: CirMethod,
    vocabulary: Optional[str | Path],
    memory: Optional[str | Path] = None,
    memory_union: bool = False,
) -> None:
    """FreeDom needs a text memory (``vocabulary``); a visual memory (``memory``,
    ``memory_union``) is FreeDom's only."""
    if method.name == "freedom" and not vocabulary:
        raise ConfigError(
            "vocabulary",
            "FreeDom needs a text memory: --vocabulary FILE (one word per line, or the Open "
            "Images class-name CSV)",
        )
    if (memory is not None or memory_union) and method.name != "freedom":
        raise ConfigError(
            "memory", f"--memory is FreeDom's visual memory; --method {method.name} has none"
        )


def image_files(folder: Path, exclude: Optional[Path] = None) -> list[str]:
    """Every image under ``folder`` (recursively, sorted, resolved), none under ``exclude``."""
    files = sorted(
        str(p.resolve())
        for p in folder.rglob("*")
        if p.suffix.lower() in IMAGE_EXTENSIONS
        and p.is_file()
        and not (exclude and exclude in p.resolve().parents)
    )
    if not files:
        raise DataError(f"no image files under {folder}")
    return files


def protocol_features(
    model: VisionLanguageEncoder,
    protocol: CompositionProtocol,
    batch_size: int = 32,
    cache: Optional[FeatureCache] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """f(x) of the database ``[N, D]`` and f(y) of the query images ``[Q, D]`` (a query image
    that is in the database is not embedded twice)."""
    database = encode_image_files(model, protocol.database, batch_size, cache)
    index = {path: i for i, path in enumerate(protocol.database)}
    outside = {p: i for i, p in enumerate(p for p in protocol.query_images if p not in index)}
    extra = encode_image_files(model, list(outside), batch_size, cache) if outside else database[:0]
    rows = [database[index[p]] if p in index else extra[outside[p]] for p in protocol.query_images]
    return database, torch.stack(rows)


def visual_memory(
    database: torch.Tensor,
    memory: Optional[str | Path] = None,
    union: bool = False,
    model: Optional[VisionLanguageEncoder] = None,
    batch_size: int = 32,
    cache: Optional[FeatureCache] = None,
) -> torch.Tensor:
    """The visual memory Z of FreeDom's expansion (Eq. 4.13): the database (§4.4.1, the default),
    an external memory ``memory`` (a folder of images, embedded with ``model``, or a ``.npy``
    array of image embeddings ``[M, D]``, ℓ2-normalised on load) or, with ``union``, the
    database and that memory together (Table 4.5)."""
    if memory is None:
        if union:
            raise ConfigError("memory-union", "needs an external memory: --memory PATH")
        return database
    path = Path(memory).expanduser().resolve()
    if path.is_dir():
        if model is None:
            raise ConfigError("memory", f"{path} is a folder of images: embedding it needs a model")
        external = encode_image_files(model, image_files(path), batch_size, cache).to(database)
    elif path.is_file() and path.suffix.lower() == ".npy":
        try:
            array = np.load(path, allow_pickle=False)
        except ValueError as error:
            raise DataError(f"--memory {path}: not a numeric .npy array ({error})") from None
        if array.ndim != 2 or array.shape[1] != database.shape[1] or not len(array):
            raise DataError(
                f"--memory {path}: expected image embeddings of shape [M, {database.shape[1]}] "
                f"(the model's embedding size), got {list(array.shape)}"
            )
        external = torch.nn.functional.normalize(torch.from_numpy(array).to(database), dim=-1)
    else:
        raise DataError(
            f"--memory {path}: expected a folder of images or a .npy array of image embeddings"
        )
    return torch.cat([database, external]) if union else external


def score_function(
    method: CirMethod,
    model: VisionLanguageEncoder,
    database: torch.Tensor,
    queries: torch.Tensor,
    vocabulary: Optional[str | Path] = None,
    memory: Optional[torch.Tensor] = None,
    cache: Optional[FeatureCache] = None,
    protocol: Optional[CompositionProtocol] = None,
) -> ScoreFunction:
    """s(q, x) of ``method`` for the query images ``queries`` and the ``database``:
    ``score(query_indices [B], texts) -> [B, N]``. FreeDom reads its text memory from
    ``vocabulary`` and takes ``memory`` as its visual memory (default: the database); the other
    methods have no memory. An oracle reads its words from the ``protocol``."""
    texts = TextEmbeddingMemo(model.encode_text)
    require_memories(method, vocabulary)
    if method.name == "freedom":
        assert vocabulary is not None
        words = read_vocabulary(vocabulary)
        text_memory = TextMemory(words, encode_texts(model, words, cache=cache))
        settings: dict[str, Any] = dict(k=method.k, n=method.n, m=method.labels_kept)
        freedom = FreeDom.variant(
            method.variant,
            texts,
            text_memory,
            database if memory is None else memory,
            query_as_proxy=method.query_as_proxy,
            **settings,
        )
        if method.oracle != "none":
            if protocol is None:
                raise ConfigError("oracle", "an oracle needs the protocol's classes and domains")
            words = oracle_words(protocol, method.oracle)
            return lambda idx, targets: oracle_scores(
                freedom, queries[idx], [words[i] for i in idx.tolist()], targets, database
            )
        return lambda idx, targets: freedom.scores(queries[idx], targets, database)
    if method.name == "weicom":
        from .weicom import weicom_scores

        return lambda idx, targets: weicom_scores(
            queries[idx], texts(targets), database, method.lam
        )
    return lambda idx, targets: baseline_scores(method.name, queries[idx], texts(targets), database)


def evaluate_cir(
    protocol: CompositionProtocol,
    method: CirMethod,
    model: VisionLanguageEncoder,
    *,
    vocabulary: Optional[str | Path] = None,
    memory: Optional[str | Path] = None,
    memory_union: bool = False,
    ap: str = "standard",
    recall_at: Iterable[int] = (),
    keep_top: int = 0,
    batch_size: int = 32,
    cache: Optional[FeatureCache] = None,
) -> dict[str, Any]:
    """Evaluate ``method`` with ``model`` on ``protocol``: the result of
    :func:`~gspdml.cir.composition_protocol.evaluate_protocol` (mAP and R@k in %, per group and
    their mean). ``memory`` / ``memory_union``: FreeDom's visual memory (:func:`visual_memory`).
    With an oracle, the same method without it is evaluated too and ``map_change`` added
    (:func:`~gspdml.cir.oracle.add_oracle_change`)."""
    require_memories(method, vocabulary, memory, memory_union)
    database, queries = protocol_features(model, protocol, batch_size, cache)
    proxies = None
    if method.name == "freedom":
        proxies = visual_memory(database, memory, memory_union, model, batch_size, cache)

    def evaluate(chosen: CirMethod) -> dict[str, Any]:
        score = score_function(
            chosen, model, database, queries, vocabulary, proxies, cache, protocol
        )
        if isinstance(protocol, GenericProtocol):
            return evaluate_generic(protocol, score, ap=ap, keep_top=keep_top)
        return evaluate_protocol(protocol, score, ap=ap, recall_at=recall_at, keep_top=keep_top)

    if method.oracle == "none":
        return evaluate(method)
    return add_oracle_change(evaluate(method), evaluate(replace(method, oracle="none")))
