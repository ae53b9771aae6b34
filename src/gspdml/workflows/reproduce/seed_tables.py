"""Every result table the five papers print, by the key ``gspdml reproduce`` gives it: what
"every headline table" counts (``gspdml reproduce --list`` ends with the count, and the README
shows that output; tests/workflows/test_reproduce_seed_tables.py holds the registry to this list).

The papers' other tables are not results and have no key (:data:`NOT_RESULTS`).
"""

from __future__ import annotations

from collections.abc import Mapping

#: paper -> the keys of its result tables, in the paper's order
RESULT_TABLES: dict[str, tuple[str, ...]] = {
    "GSP paper (Gürbüz, Şener, Alatan, ICCV 2023; Tables 1-4 and supplement Table 5)": (
        "gsp-table1",
        "gsp-table2",
        "gsp-table3a",
        "gsp-table3b",
        "gsp-table4",
        "gsp-table5",
    ),
    "XML paper (Gürbüz & Alatan, ICIP 2023; Table 1, top and bottom)": (
        "xml-table1",
        "xml-table1-conventional",
    ),
    "ProxyNCA++ paper (Teh, DeVries, Taylor, ECCV 2020; Tables 3-15)": tuple(
        f"proxynca-table{n}" for n in range(3, 16)
    ),
    "Psomas thesis (2024; Tables 2.3-2.6, 3.2-3.12, 4.1-4.7, 5.2-5.3)": (
        *(f"metrix-table2.{n}" for n in range(3, 7)),
        *(f"simpool-table3.{n}" for n in range(2, 13)),
        *(f"freedom-table4.{n}" for n in range(1, 8)),
        "weicom-table5.2",
        "weicom-table5.3",
    ),
    "Gürbüz thesis (2024; Tables 3.1-3.3, 5.1-5.4)": (
        "ccp-table3.1",
        "ccp-table3.2a",
        "ccp-table3.2b",
        "ccp-table3.3",
        "thesis-table5.1",
        "thesis-table5.2a",
        "thesis-table5.2b",
        "thesis-table5.3",
        "thesis-table5.4",
    ),
}

#: the papers' tables that print no result, and what they print instead
NOT_RESULTS = {
    "ProxyNCA++ paper, Table 1": "the datasets' composition, learning rates and batch sizes",
    "ProxyNCA++ paper, Table 2": "backbones and their ImageNet top-1 error, quoted",
    "Psomas thesis, Table 2.1": "the loss functions under Metrix's generic formulation",
    "Psomas thesis, Table 2.2": "the datasets' statistics and settings",
    "Psomas thesis, Table 3.1": "pooling methods as instances of SimPool's framework",
    "Psomas thesis, Table 5.1": "PatternCom's statistics",
}


def coverage_markdown(registered: Mapping[str, object], runnable: Mapping[str, int]) -> str:
    """The count line of ``--list``: how many of :data:`RESULT_TABLES` have a key in
    ``registered`` and how many of those have a runnable row (``runnable``: key -> count)."""
    every = [key for keys in RESULT_TABLES.values() for key in keys]
    known = [key for key in every if key in registered]
    placeholders = [key for key in known if not runnable.get(key)]
    lines = [
        f"The five papers print {len(every)} result tables; `gspdml reproduce` knows "
        f"{len(known)} of them: {len(known) - len(placeholders)} with rows that run here, "
        f"{len(placeholders)} whose every row is listed with what is missing "
        f"({', '.join(placeholders)})."
    ]
    unknown = [key for key in every if key not in registered]
    if unknown:
        lines.append(f"Not yet registered: {', '.join(unknown)}.")
    return "\n".join(lines) + "\n"
