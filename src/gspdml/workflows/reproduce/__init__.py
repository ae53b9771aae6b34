"""``gspdml reproduce``: the papers' headline tables as rows of pinned presets, run by their
protocol, or, for composed image retrieval, of pinned evaluations
(:mod:`gspdml.workflows.reproduce.cir_run`), printed beside the papers' numbers
(:mod:`gspdml.workflows.reproduce.run`; the tables: :mod:`gspdml.workflows.reproduce.registry`
and the modules it lists)."""

from gspdml.workflows.reproduce.registry import Column, Reported, Row, Table
from gspdml.workflows.reproduce.report import table_markdown
from gspdml.workflows.reproduce.run import (
    dry_run,
    dry_run_markdown,
    get_table,
    list_markdown,
    plan_table,
    reproduce,
)
from gspdml.workflows.reproduce.tables import TABLES

__all__ = [
    "TABLES",
    "Column",
    "Reported",
    "Row",
    "Table",
    "dry_run",
    "dry_run_markdown",
    "get_table",
    "list_markdown",
    "plan_table",
    "reproduce",
    "table_markdown",
]
