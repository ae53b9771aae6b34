"""Every table ``gspdml reproduce`` knows, by key, in the order ``--list`` shows them."""

from __future__ import annotations

from gspdml.workflows.reproduce import (
    cir_tables,
    gsp_paper,
    gurbuz_thesis,
    proxynca_paper,
    psomas_thesis,
    simpool_thesis,
)
from gspdml.workflows.reproduce.registry import Table

TABLES: dict[str, Table] = {
    table.key: table
    for table in (
        *gsp_paper.TABLES,
        *gurbuz_thesis.TABLES,
        *proxynca_paper.TABLES,
        *psomas_thesis.TABLES,
        *simpool_thesis.TABLES,
        *cir_tables.TABLES,
    )
}
