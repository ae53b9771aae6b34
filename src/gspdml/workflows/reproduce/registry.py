"""The vocabulary of ``gspdml reproduce``: a paper's table as rows of presets with the paper's numbers.

A :class:`Table` is one headline table of a paper: its protocol
(:mod:`gspdml.workflows.protocol`, whose rows are presets trained once per seed, or one of
:data:`SPEC_PROTOCOLS`, whose rows are specs, each run once without seeds by the protocol's own
runner: a *spec table*), its seeds, :class:`Column` s and :class:`Row` s. A row the library
cannot run yet has a ``missing`` reason (listed, never faked). Numbers are in percent, as the papers print them,
unless a column scales them. The tables live beside this module, one module per paper
(:data:`gspdml.workflows.reproduce.tables.TABLES`); :func:`grid` reads a table written in the
paper's layout.

GPU-hour estimate (``--dry-run``): each model of a row costs ``steps x batch x
SECONDS_PER_IMAGE[backbone]``, ``steps`` being ``schedule.max_steps``, or for an early-stopped
run the dataset's :data:`TYPICAL_STEPS` (capped by it); evaluation and data loading are not
counted, so it is a lower bound of the order of magnitude.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Union

from gspdml.errors import ConfigError
from gspdml.workflows.protocol import DEFAULT_SEEDS, PROTOCOLS, SEED_MODELS
from gspdml.workflows.reproduce.cir_spec import CirSpec
from gspdml.workflows.reproduce.classify_spec import ClassifySpec
from gspdml.workflows.reproduce.frozen_spec import FrozenSpec
from gspdml.workflows.reproduce.resources_spec import ResourceSpec

#: the protocols of spec tables (module doc), each to the :class:`Row` field that holds a runnable
#: row's spec: run by the protocol's own runner instead of the training protocols, one run per
#: row and no seeds. Composed image retrieval, frozen pre-trained models (also on revisited Oxford
#: and Paris, ``probe``: their frozen features classifying ImageNet-1k, ``localisation``: their
#: attention maps' boxes, ``backgrounds``: ImageNet-9) and the count of a model's parameters and
#: multiply-adds train nothing; ``classify`` trains one supervised classifier per row (seed 0)
SPEC_PROTOCOLS = {
    "cir": "cir",
    "frozen": "frozen",
    "revisited": "frozen",
    "probe": "frozen",
    "localisation": "frozen",
    "backgrounds": "frozen",
    "resources": "resources",
    "classify": "classify",
}

#: seconds of one training image (forward + backward, fp32, 224 px crops) on one H100, per
#: backbone. ResNet-50: measured, 1498 img/s at batch 64 (docs/benchmarks.md, "One H100").
#: BN-Inception: not measured; twice ResNet-50's rate, the ratio of their forward FLOPs (about 2
#: and 4.1 GFLOPs). The small CNN of the tests and demos: an assumed 200K img/s. A backbone
#: missing here counts as ResNet-50.
SECONDS_PER_IMAGE = {"resnet50": 1 / 1500, "bn_inception": 1 / 3000, "small_cnn": 1 / 200000}
#: training steps of an early-stopped model, per dataset. SOP and In-shop: the means of the rows
#: of Gürbüz thesis Table 3.3 (rounded averages of the 4 fold models, 10 methods): 78K and 102K.
#: CUB and Cars: not published; 3K is an assumption (the runs stop after 15 rounds of 100 steps
#: without improvement, typically within a few epochs of ~180 steps at 32 images).
TYPICAL_STEPS = {"cub": 3000, "cub200": 3000, "cars": 3000, "cars196": 3000}
TYPICAL_STEPS.update(sop=78000, stanford_online_products=78000, inshop=102000, in_shop=102000)


@dataclass(frozen=True)
class Column:
    """One reported number of a row: ``scale x summary[group][metric]`` of the protocol's result
    (:mod:`gspdml.workflows.tables`), titled as in the paper; our sigma is read from
    ``sigma_group`` (default ``group``; the conventional protocol's "best" repeat has none, its
    sigma is that of the repeats). ``scale`` 100 reads a fraction as percent; 1e-3 reads
    training steps in thousands. In a ``cir`` table, ``group`` and ``metric`` name a number of
    the row's evaluations (:func:`gspdml.workflows.reproduce.cir_run.summarise`); in a
    ``frozen`` table ``metric`` is a metric of the dataset's test split (``recall_at_1``)."""

    group: str
    metric: str
    title: str
    sigma_group: Optional[str] = None
    scale: float = 100.0


def recall_columns(*ks: int, group: str = "repeats") -> tuple[Column, ...]:
    """One R@k column (``summary[group]["recall_at_<k>"]``) per ``k``."""
    return tuple(Column(group, f"recall_at_{k}", f"R@{k}") for k in ks)


@dataclass(frozen=True)
class Reported:
    """A number the paper printed, in percent, with its printed std (None when it gives none)."""

    value: float
    std: Optional[float] = None

    @classmethod
    def parse(cls, text: str) -> Optional[Reported]:
        """``"68.85"``, ``"68.85±0.41"``; ``"–"`` (not reported) is None."""
        if text in ("–", "-"):
            return None
        value, _, std = text.partition("±")
        return cls(float(value), float(std) if std else None)


@dataclass(frozen=True)
class Row:
    """One method on one dataset. ``preset`` trains it (a table of a training protocol),
    ``cir`` evaluates it (a ``cir`` table), ``frozen`` evaluates a released model (a ``frozen``,
    ``revisited`` or ``probe`` table), ``resources`` counts a model (a ``resources`` table),
    ``classify`` trains a classifier (a ``classify`` table); ``missing`` says what the library
    lacks to run it.
    ``protocol`` is the row's own protocol where the paper
    ran this dataset otherwise than the rest of the table (GSP Table 4: the Cifar Collage by its
    own validation split, the CUB rows by the fair protocol); None: the table's. ``init_from``
    is the preset of another row of the table whose trained models start this row's, seed by
    seed (``model.init_from``; GSP Table 3b: LIBC+GSP fine-tunes the LIBC row's models).
    ``candidate`` is, for a missing row, the preset the table's naming would give it (the tests
    hold a missing reason to it: that preset must not exist, or the row would run)."""

    label: str
    dataset: str
    paper: Mapping[str, Reported]
    preset: Optional[str] = None
    missing: Optional[str] = None
    cir: Optional[CirSpec] = None
    frozen: Optional[FrozenSpec] = None
    resources: Optional[ResourceSpec] = None
    classify: Optional[ClassifySpec] = None
    protocol: Optional[str] = None
    init_from: Optional[str] = None
    candidate: Optional[str] = None

    def __post_init__(self) -> None:
        given = [self.preset, self.missing, self.cir, self.frozen, self.resources, self.classify]
        if given.count(None) != len(given) - 1:
            raise ValueError(
                f"row {self.key}: give exactly one of preset, cir, frozen, resources and missing"
            )

    @property
    def key(self) -> str:
        """How ``--rows`` names the row: ``<dataset>/<label>``."""
        return f"{self.dataset}/{self.label}"

    @property
    def status(self) -> str:
        return "runnable" if self.missing is None else f"missing: {self.missing}"


@dataclass(frozen=True)
class Table:
    """A paper's table: ``citation`` names paper and table, ``protocol`` is a protocol of
    :mod:`gspdml.workflows.protocol` and ``seeds`` the training seeds of every row."""

    key: str
    title: str
    citation: str
    protocol: str
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    notes: str = ""

    def __post_init__(self) -> None:
        if self.protocol not in (*PROTOCOLS, *SPEC_PROTOCOLS):
            raise ValueError(f"table {self.key}: unknown protocol {self.protocol!r}")
        kind = SPEC_PROTOCOLS.get(self.protocol, "preset")
        for row in self.runnable:
            if getattr(row, kind) is None:
                raise ValueError(
                    f"table {self.key}, row {row.key}: a {self.protocol} row needs a {kind}"
                )
        keys = [row.key for row in self.rows]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise ValueError(f"table {self.key}: repeated rows {repeated}")
        titles = {c.title for c in self.columns}
        protocols = {row.preset: self.protocol_of(row) for row in self.runnable}
        for row in self.rows:
            if row.init_from is not None and not (
                protocols.get(row.init_from) in SEED_MODELS and self.protocol_of(row) in SEED_MODELS
            ):
                raise ValueError(
                    f"table {self.key}, row {row.key}: init_from {row.init_from!r} must be the "
                    f"preset of a runnable row, both rows of a protocol of one model per seed "
                    f"({', '.join(SEED_MODELS)})"
                )
            if row.protocol is not None and row.protocol not in PROTOCOLS:
                raise ValueError(
                    f"table {self.key}, row {row.key}: unknown protocol {row.protocol!r}"
                )
            unknown = set(row.paper) - titles
            if unknown:
                raise ValueError(f"table {self.key}, row {row.key}: unknown columns {unknown}")

    @property
    def runnable(self) -> list[Row]:
        return [row for row in self.rows if row.missing is None]

    def protocol_of(self, row: Row) -> str:
        """The protocol ``row`` runs by: its own, else the table's."""
        return row.protocol or self.protocol


def printed(columns: Sequence[Column], cells: Sequence[str], label: str) -> dict[str, Reported]:
    """The paper's numbers of the line ``label``: ``cells`` in the order of ``columns``, a
    cell ``value``, ``value±std`` or ``–`` (not reported, left out)."""
    if len(cells) != len(columns):
        raise ValueError(f"{label}: {len(cells)} cells for {len(columns)} columns")
    parsed = ((c.title, Reported.parse(cell)) for c, cell in zip(columns, cells))
    return {title: value for title, value in parsed if value is not None}


def grid_table(
    key: str,
    title: str,
    citation: str,
    protocol: str,
    columns: tuple[Column, ...],
    text: str,
    datasets: Sequence[str],
    preset: Union[str, Mapping[str, str]],
    missing: Mapping[str, str] = {},
    *,
    init_from: Mapping[str, str] = {},
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    notes: str = "",
) -> Table:
    """A :class:`Table` whose rows are the :func:`grid` of ``text``."""
    rows = grid(text, datasets, columns, preset, missing, init_from=init_from)
    return Table(key, title, citation, protocol, columns, rows, seeds, notes)


def grid(
    text: str,
    datasets: Sequence[str],
    columns: Sequence[Column],
    preset: Union[str, Mapping[str, str]],
    missing: Mapping[str, str] = {},
    protocols: Mapping[str, str] = {},
    init_from: Mapping[str, str] = {},
) -> tuple[Row, ...]:
    """Rows from a table in the paper's layout: one line per method, ``LABEL KEY CELL ...``
    with the cells of ``datasets`` (outer) x ``columns`` (inner) in the paper's order. ``KEY``
    names the preset of a dataset through the template ``preset`` (``"{dataset}-fair-{key}"``,
    or one template per dataset; a ``KEY`` starting with ``=`` is its own template,
    ``=metrix-{dataset}-ms``); the rows of a dataset in ``protocols`` run by that protocol
    instead of the table's (:attr:`Row.protocol`); a ``KEY`` in ``init_from`` starts from the
    models of the row whose preset its template names (:attr:`Row.init_from`); a ``KEY`` in
    ``missing`` makes rows with that reason instead (per dataset, ``"KEY@dataset"`` wins). A
    cell is ``value``, ``value±std`` or ``–`` (not reported); every line gives its rows, a
    missing row without any reported number included (a row is listed, never left out)."""
    rows = []
    for line in text.strip().splitlines():
        label, key, *cells = line.split()
        if len(cells) != len(datasets) * len(columns):
            raise ValueError(
                f"{label}: {len(cells)} cells for {len(datasets)} datasets x {len(columns)} columns"
            )
        for d, dataset in enumerate(datasets):
            paper = printed(columns, cells[d * len(columns) : (d + 1) * len(columns)], label)
            reason = missing.get(f"{key}@{dataset}", missing.get(key))
            template = key[1:] if key.startswith("=") else preset
            template = template if isinstance(template, str) else template[dataset]
            protocol = protocols.get(dataset)
            name = template.format(dataset=dataset, key=key)
            if reason:
                rows.append(
                    Row(label, dataset, paper, missing=reason, protocol=protocol, candidate=name)
                )
            else:
                start = init_from[key].format(dataset=dataset) if key in init_from else None
                rows.append(Row(label, dataset, paper, name, protocol=protocol, init_from=start))
    return tuple(rows)


def select_rows(table: Table, patterns: Sequence[str]) -> list[Row]:
    """The rows named by ``patterns`` (shell patterns on a row's key ``<dataset>/<label>`` or on
    its preset); all rows when there is none. A pattern that names no row is an error."""
    if not patterns:
        return list(table.rows)
    from fnmatch import fnmatchcase

    def hit(row: Row, pattern: str) -> bool:
        return fnmatchcase(row.key, pattern) or bool(
            row.preset and fnmatchcase(row.preset, pattern)
        )

    for pattern in patterns:
        if not any(hit(row, pattern) for row in table.rows):
            raise ConfigError(
                "--rows",
                f"{pattern!r} names no row of {table.key}; rows are <dataset>/<label> or a "
                f"preset, e.g. {table.rows[0].key!r} (gspdml reproduce {table.key} --dry-run lists them)",
            )
    return [row for row in table.rows if any(hit(row, p) for p in patterns)]
