"""``gspdml reproduce`` of a composed-image-retrieval table (protocol ``cir``): every runnable
row is a pinned evaluation (:class:`~gspdml.workflows.reproduce.cir_spec.CirSpec`) run through
the pipeline of ``gspdml cir`` (:func:`gspdml.cir.evaluation.evaluate_cir`, the model loaded by
:func:`gspdml.cir.backends.load_model`).

Inputs. ``--data-root DIR`` (default ``data``) is the ``data/`` folder of the FreeDom release
(``imagenet_r/``, ``minidn/``, ``nico/``, ``ltll/`` with their image lists,
:mod:`gspdml.cir.domain_datasets`) and holds ``PatternNet/`` (the PatternNet tree with its
``PatternCom/`` annotation CSVs, :mod:`gspdml.cir.patterncom`). The settings ``key=value``
(:class:`CirSettings`) name what is not in the data folder: the model (``model=SPEC``, any spec
of ``gspdml cir --model``, replacing the rows' CLIP / RemoteCLIP), its local ``weights``, the
``vocabulary`` (default ``DIR/open_image_v7_class_names.csv``), Table 4.5's external visual
``memory``, the ``device``, ``batch_size`` and the feature ``cache``. The generic benchmarks of
Table 4.7 are ``DIR/FashionIQ``, ``DIR/CIRR`` and ``DIR/CIRCO`` in their official layouts
(:mod:`gspdml.cir.generic_datasets`); a row whose benchmark folder is absent, or whose model
weights cannot be had, is listed as missing with that reason (:mod:`.cir_generic_run`).

Results. A row runs one evaluation per benchmark, stored in
``<output_dir>/cir/<benchmark>/<method>-<key>.json``, ``key`` hashing
:meth:`CirEvaluation.settings` (files by their content), so a second call or another table with
the same evaluation (Table 4.2's rows are Table 4.1's ImageNet-R evaluations) reuses it. A
column reads the row's :func:`summarise`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gspdml.cir.composition_protocol import CompositionProtocol, source_domain_means
from gspdml.cir.domain_datasets import get_domain_dataset
from gspdml.cir.features import FeatureCache
from gspdml.cir.generic_datasets import GENERIC_BENCHMARKS, generic_protocol
from gspdml.cir.vl_model import VisionLanguageEncoder
from gspdml.data.cache import cache_key
from gspdml.errors import ConfigError
from gspdml.workflows.reproduce.cir_generic_run import (
    MODEL_ERRORS,
    absent_benchmark,
    model_unavailable,
)
from gspdml.workflows.reproduce.cir_spec import CirSpec
from gspdml.workflows.reproduce.registry import Table, select_rows
from gspdml.workflows.reproduce.report import (
    DEFAULT_OUTPUT,
    EvaluationPlan,
    Ours,
    content_of,
    evaluation_payload,
    evaluations_markdown,
    number_problem,
    row_entry,
    store_result,
    stored_result,
    table_entries,
)
from gspdml.workflows.reproduce.settings import parse_settings

#: the default data folder (the FreeDom release's ``data/``), its vocabulary and PatternNet tree
DATA_ROOT = "data"
VOCABULARY = "open_image_v7_class_names.csv"
PATTERNNET = "PatternNet"


@dataclass(frozen=True)
class CirSettings:
    """The ``key=value`` settings of a ``cir`` table, for every row selected: ``model`` replaces
    the rows' model spec, ``weights`` is its local checkpoint (the WeiCom tables pin CLIP and
    RemoteCLIP rows: select the rows of one model with ``--rows`` to give its checkpoint); ``vocabulary`` FreeDom's text
    memory file, ``memory`` the external visual memory of Table 4.5 (a ``.npy`` of image
    embeddings or a folder of images); ``cache`` the feature cache folder."""

    model: Optional[str] = None
    weights: Optional[str] = None
    device: str = "cpu"
    batch_size: int = 32
    vocabulary: Optional[str] = None
    memory: Optional[str] = None
    cache: Optional[str] = None

    @classmethod
    def parse(cls, overrides: Sequence[str]) -> CirSettings:
        return parse_settings(cls, overrides, "cir")


@dataclass(frozen=True)
class CirEvaluation:
    """One benchmark of a row as it runs: the row's spec with the model spec and weights, the
    data ``folder`` (the release's data folder, or the PatternNet tree), the vocabulary and the
    external memory files, and the result file ``output``."""

    benchmark: str
    spec: CirSpec
    model: str
    weights: Optional[str]
    folder: Path
    vocabulary: Optional[Path]
    memory: Optional[Path]
    output: Path

    @property
    def recall_at(self) -> tuple[int, ...]:
        """The R@k cut-offs of the authors' evaluation of the benchmark (none for PatternCom)."""
        if self.benchmark == "patterncom":
            return ()
        if self.benchmark in GENERIC_BENCHMARKS:
            return GENERIC_BENCHMARKS[self.benchmark].recall_at
        return get_domain_dataset(self.benchmark).recall_at

    def settings(self) -> dict[str, Any]:
        """Everything that decides the numbers, as stored beside them."""
        return {
            "benchmark": self.benchmark,
            "method": asdict(self.spec.method),
            "model": self.model,
            "weights": content_of(self.weights),
            "ap": self.spec.ap,
            "recall_at": list(self.recall_at),
            "data": str(self.folder),
            "vocabulary": content_of(self.vocabulary),
            "memory": self.spec.memory,
            "memory_file": content_of(self.memory),
        }

    def stored(self) -> Optional[dict[str, Any]]:
        """The stored result of these settings, None when there is none yet (or when it is
        invalid: :meth:`result_problem`)."""
        return stored_result(self.output, self.settings(), self.result_problem)

    def result_problem(self, result: dict[str, Any]) -> Optional[str]:
        """What is wrong with a stored ``result`` (None: nothing): ``map`` and each
        ``recall@k`` in [0, 100] (percent), overall and in each of a non-empty ``groups``, with
        a positive query count."""
        names = ["map", *(f"recall@{k}" for k in self.recall_at)]
        groups = result.get("groups")
        if not isinstance(groups, dict) or not groups:
            return "'groups' is not a non-empty object"
        for where, values in [("", result), *((f"group {g!r}: ", v) for g, v in groups.items())]:
            if not isinstance(values, dict):
                return f"{where}not an object"
            count = values.get("queries")
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                return f"{where}'queries' is {count!r}, not a positive count"
            for name in names:
                fault = number_problem(values, name, 100.0)
                if fault is not None:
                    return where + fault
        return None

    def protocol(self) -> CompositionProtocol:
        """The benchmark's protocol; a PatternCom tree whose queries differ from Table 5.1 is
        evaluated with a note on stderr (its numbers are not the thesis' benchmark)."""
        if self.benchmark == "patterncom":
            from gspdml.cir.patterncom import read_patterncom, table_mismatches

            patterncom = read_patterncom(self.folder)
            mismatches = table_mismatches(patterncom)
            if mismatches:
                print(
                    f"note: {self.folder}: the annotations differ from Table 5.1 in "
                    f"{len(mismatches)} (attribute, class, value) cells, e.g. {mismatches[0]}",
                    file=sys.stderr,
                )
            return patterncom.protocol
        if self.benchmark in GENERIC_BENCHMARKS:
            return generic_protocol(self.benchmark, self.folder.parent)
        from gspdml.cir.domain_datasets import domain_dataset_protocol

        return domain_dataset_protocol(self.benchmark, self.folder)


#: a row of the table with its evaluations
CirRowPlan = EvaluationPlan[CirEvaluation]


def plan_cir(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
    need_memory: bool = True,
) -> list[CirRowPlan]:
    """The selected rows of a ``cir`` table with their evaluations. A row with an external
    visual memory needs the setting ``memory=PATH`` (unless ``need_memory`` is False: a dry
    run lists it without)."""
    settings = CirSettings.parse(overrides)
    data = Path(data_root or DATA_ROOT).expanduser().resolve()
    output = Path(output_dir or DEFAULT_OUTPUT) / "cir"
    plans = []
    for row in select_rows(table, rows):
        if row.cir is None:
            plans.append(CirRowPlan(row))
            continue
        spec = row.cir
        vocabulary = None
        if spec.method.name == "freedom":
            vocabulary = Path(settings.vocabulary or data / VOCABULARY).expanduser().resolve()
        memory = None
        if spec.memory != "database":
            if settings.memory is None and need_memory:
                raise ConfigError(
                    "memory",
                    f"row {row.key} of {table.key} searches an external visual memory: give "
                    "memory=PATH (a .npy of image embeddings [M, D] or a folder of images; the "
                    "thesis used the first 40M LAION-400M images), or leave the row out with --rows",
                )
            if settings.memory is not None:
                memory = Path(settings.memory).expanduser().resolve()
        evaluations = []
        for benchmark in spec.benchmarks:
            folder = data / PATTERNNET if benchmark == "patterncom" else data
            if benchmark in GENERIC_BENCHMARKS:
                folder = data / GENERIC_BENCHMARKS[benchmark].folder
            model = settings.model or spec.model
            draft = CirEvaluation(
                benchmark, spec, model, settings.weights, folder, vocabulary, memory, Path()
            )
            name = f"{spec.method.name}-{cache_key(draft.settings())}.json"
            evaluations.append(replace(draft, output=output / benchmark / name))
        absent = absent_benchmark(evaluations)
        plans.append(CirRowPlan(row, () if absent else tuple(evaluations), absent))
    return plans


def summarise(results: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """The groups a column may read, per metric (``map``, ``recall@k``; in %), from a row's
    results per benchmark: each benchmark's mean over its groups (``imagenet_r``); for a row of
    one benchmark also every group of its protocol (``real->cartoon``, ``color``) and every
    source domain's mean over its targets (``from real``); ``all``: the mean over the benchmarks
    (for one benchmark its mean over the groups)."""

    def metrics(row: Mapping[str, Any]) -> dict[str, float]:
        return {k: float(v) for k, v in row.items() if k.startswith(("map", "recall"))}

    summary = {benchmark: metrics(result) for benchmark, result in results.items()}
    if len(results) == 1:
        (result,) = results.values()
        summary.update({group: metrics(row) for group, row in result["groups"].items()})
        for source, row in source_domain_means(result["groups"]).items():
            summary[f"from {source}"] = metrics(row)
    common = set.intersection(*(set(summary[b]) for b in results))
    summary["all"] = {m: float(np.mean([summary[b][m] for b in results])) for m in sorted(common)}
    return summary


def _evaluate(
    evaluation: CirEvaluation,
    settings: CirSettings,
    models: dict[tuple[str, Optional[str]], VisionLanguageEncoder],
    cache: FeatureCache,
) -> dict[str, Any]:
    """The result of ``evaluation``: the stored one, or evaluated now and stored."""
    from gspdml.cir.backends import load_model
    from gspdml.cir.evaluation import evaluate_cir

    stored = evaluation.stored()
    if stored is not None:
        return stored
    protocol = evaluation.protocol()
    key = (evaluation.model, evaluation.weights)
    if key not in models:
        models[key] = load_model(
            evaluation.model, weights=evaluation.weights, device=settings.device
        )
    result = evaluate_cir(
        protocol,
        evaluation.spec.method,
        models[key],
        vocabulary=evaluation.vocabulary,
        memory=evaluation.memory,
        memory_union=evaluation.spec.memory == "union",
        ap=evaluation.spec.ap,
        recall_at=evaluation.recall_at,
        batch_size=settings.batch_size,
        cache=cache,
    )
    store_result(evaluation.output, evaluation.settings(), result)
    return result


def reproduce_cir(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> dict[str, Any]:
    """Evaluate the selected rows of a ``cir`` table (see the module doc) and write the table;
    returns its JSON payload (``rows``: one entry per row of the table, in its order)."""
    settings = CirSettings.parse(overrides)
    plans = plan_cir(
        table, rows=rows, data_root=data_root, overrides=overrides, output_dir=output_dir
    )
    cache = FeatureCache(settings.cache or FeatureCache.default_directory())
    models: dict[tuple[str, Optional[str]], VisionLanguageEncoder] = {}

    def run(plan: CirRowPlan) -> dict[str, Any]:
        try:
            results = {e.benchmark: _evaluate(e, settings, models, cache) for e in plan.evaluations}
        except MODEL_ERRORS as error:
            reason = model_unavailable(plan.evaluations, error)
            if reason is None:
                raise
            return row_entry(table, plan.row, f"missing: {reason}")
        summary = summarise(results)
        ours: dict[str, Ours] = {
            column.title: (summary.get(column.group, {}).get(column.metric), None)
            for column in table.columns
        }
        runs = {e.benchmark: str(e.output) for e in plan.evaluations}
        other_model = ["model"] if settings.model is not None else []  # not the paper's model
        return row_entry(
            table, plan.row, "evaluated", ours, runs, 1, settings.model, smoke=other_model
        )

    entries = table_entries(table, plans, run)
    for plan in plans:
        if plan.absent:
            position = next(i for i, e in enumerate(entries) if e["key"] == plan.row.key)
            entries[position] = row_entry(table, plan.row, f"missing: {plan.absent}")
    return evaluation_payload(table, entries, overrides, data_root, output_dir)


def _memory(evaluation: CirEvaluation) -> str:
    if evaluation.spec.memory == "database":
        return "database"
    return f"{evaluation.spec.memory}: {evaluation.memory or 'needs memory=PATH'}"


def cir_dry_run_markdown(table: Table, plans: Sequence[CirRowPlan]) -> str:
    """``--dry-run`` of a ``cir`` table: every evaluation of the selected rows with its inputs
    and whether its result is stored already."""
    body: list[list[Any]] = []
    for plan in plans:
        if not plan.evaluations:
            status = f"missing: {plan.absent}" if plan.absent else plan.row.status
            body.append([plan.row.key, status, *[""] * 8])
        for evaluation in plan.evaluations:
            method = evaluation.spec.method
            state = "stored" if evaluation.stored() is not None else "to run"
            body.append(
                [
                    plan.row.key,
                    evaluation.spec.describe().rsplit(",", 1)[0],
                    f"`{evaluation.model}`"
                    + (f" ({evaluation.weights})" if evaluation.weights else ""),
                    evaluation.benchmark,
                    str(evaluation.folder),
                    "–" if evaluation.vocabulary is None else str(evaluation.vocabulary),
                    _memory(evaluation) if method.name == "freedom" else "–",
                    evaluation.spec.ap,
                    str(evaluation.output),
                    state,
                ]
            )
    header = ["Row", "Method", "Model", "Benchmark", "Data", "Vocabulary", "Memory", "AP"]
    header += ["Result", "State"]
    how = (
        "Nothing trains: each evaluation embeds its benchmark once with the frozen model "
        "(features cached) and ranks the database for every composed query. Settings "
        "key=value: " + ", ".join(f.name for f in fields(CirSettings)) + "."
    )
    return evaluations_markdown(table, plans, header, body, how)
