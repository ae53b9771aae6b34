"""What keeps a row of the generic composed-retrieval benchmarks (Psomas thesis Table 4.7:
Fashion-IQ, CIRR, CIRCO; :mod:`gspdml.cir.generic_datasets`) from running on this machine, said
as the row's missing reason instead of stopping the table: the benchmark's folder is not under
the data folder, or the vision-language model cannot be had (its weights are neither a local
file nor cached, or its library is not installed). The other benchmarks keep their errors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Protocol

from gspdml.cir.generic_datasets import GENERIC_BENCHMARKS
from gspdml.cir.vl_model import OptionalDependencyError, WeightsUnavailableError

#: the errors of a model that cannot be had here
MODEL_ERRORS = (WeightsUnavailableError, OptionalDependencyError)


class Evaluation(Protocol):
    """The part of a row's evaluation read here (``cir_run.CirEvaluation``)."""

    @property
    def benchmark(self) -> str: ...

    @property
    def folder(self) -> Path: ...


def absent_benchmark(evaluations: Sequence[Evaluation]) -> Optional[str]:
    """Why a row cannot run (None: it can): the first generic benchmark whose folder is absent."""
    for evaluation in evaluations:
        benchmark = GENERIC_BENCHMARKS.get(evaluation.benchmark)
        if benchmark is not None and not evaluation.folder.is_dir():
            return (
                f"dataset not found at {evaluation.folder} (the {benchmark.title} release in "
                f"its official layout; --data-root names the folder that holds "
                f"{benchmark.folder}/)"
            )
    return None


def model_unavailable(evaluations: Sequence[Evaluation], error: Exception) -> Optional[str]:
    """The missing reason when loading the model of a generic benchmark's row failed for want
    of its weights or library (None: ``error`` is something else, or another benchmark)."""
    generic = any(e.benchmark in GENERIC_BENCHMARKS for e in evaluations)
    if generic and isinstance(error, MODEL_ERRORS):
        return f"the vision-language model is not available here: {error}"
    return None
