"""Regenerate the README's generated tables from result files, never by hand.

    python scripts/readme_tables.py [--demo runs/demo/summary.json] [--readme README.md] [--check]

* between ``<!-- demo-table -->`` and ``<!-- /demo-table -->``: the table ``gspdml demo``
  printed (from the ``summary.json`` it writes into its output directory), with the gain of GSP
  over GAP and the wall time computed from it;
* between ``<!-- timings -->`` and ``<!-- /timings -->``: the wall time of ``make demo`` and
  ``make test`` per CPU class, from ``docs/timings.json`` (written by
  ``scripts/time_readme_commands.py``, which times them on a fresh clone);
* between ``<!-- reproductions-table -->`` and ``<!-- /reproductions-table -->``: one row per
  entry of the ``reproduction`` list of each ``experiments/<name>/results.json`` (claim, the
  paper's number, ours as mean ± std, verdict, command); experiments without such a file are
  listed as not re-run;
* between ``<!-- reproduce-tables -->`` and ``<!-- /reproduce-tables -->``: the tables
  ``gspdml reproduce`` knows, with their row counts (``gspdml reproduce --list``);
* in each ``experiments/<name>/README.md`` with a ``<!-- results -->`` ... ``<!-- /results -->``
  block: the table of every run recorded in its ``results.json`` (per regime), its seeds and
  training time, and the verdicts;
* in ``docs/paper-vs-code.md``, the blocks of :data:`ZSR_STUDIES`: the tables of the ZSR studies
  stored by ``scripts/zsr_defaults.py`` (mean ± std over seeds per variant).

``--check`` exits with status 1 when the README differs from what would be written (for CI).
The README is written atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gspdml.workflows.demo import format_table  # noqa: E402
from gspdml.workflows.reproduce import list_markdown  # noqa: E402
from gspdml.workflows.tables import markdown_table  # noqa: E402


def replace_block(text: str, marker: str, body: str) -> str:
    """``text`` with everything between ``<!-- marker -->`` and ``<!-- /marker -->`` replaced."""
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise SystemExit(f"readme_tables: the README needs exactly one {start} ... {end} block")
    head, rest = text.split(start)
    _, tail = rest.split(end)
    return f"{head}{start}\n{body.strip()}\n{end}{tail}"


def demo_block(rows: list[dict]) -> str:
    """The demo's table and the two numbers the text around it quotes."""
    by_name = {row["method"]: row for row in rows}
    lines = [format_table(rows), ""]
    if "gap" in by_name and "gsp" in by_name:
        gain = 100 * (by_name["gsp"]["test"]["map_at_r"] - by_name["gap"]["test"]["map_at_r"])
        lines.append(f"GSP − GAP: {gain:+.2f} MAP@R (test classes, one seed).")
    trained = [row["seconds"] for row in rows if row.get("seconds") is not None]
    if trained:
        lines.append(
            f"Training time of the table's runs: {sum(trained):.0f} s (pre-training excluded; see `gspdml pretrain`)."
        )
    return "\n".join(lines)


def timings_block(records: list[dict]) -> str:
    """One row per (command, CPU class) of ``docs/timings.json``: the wall time, the precision
    ``auto`` chose, and for the demo whether GSP stayed ahead of GMP and GAP."""
    header = [
        "command",
        "CPU class",
        "CPU",
        "threads",
        "precision (auto)",
        "wall time",
        "GSP > GMP > GAP",
        "commit, date",
    ]
    rows = []
    for r in records:
        maps = r.get("map_at_r", {})
        pattern = "-" if not maps else ("yes" if maps["gsp"] > maps["gmp"] > maps["gap"] else "no")
        status = "" if r["exit"] == 0 else f" (exit {r['exit']})"
        rows.append(
            [
                f"`{r['command']}`",
                r["cpu_class"],
                r["cpu"],
                str(r["threads"]),
                r["precision"],
                f"{r['seconds'] / 60:.1f} min{status}",
                pattern,
                f"{r['commit']}, {r['date']}",
            ]
        )
    return markdown_table(header, rows)


def reproduction_rows(experiments: Path) -> list[list[str]]:
    rows = []
    for folder in sorted(p for p in experiments.iterdir() if (p / "run.py").is_file()):
        command = f"`python experiments/{folder.name}/run.py`"
        path = folder / "results.json"
        entries = json.loads(path.read_text()).get("reproduction", []) if path.is_file() else []
        if not entries:
            rows.append(
                [
                    folder.name,
                    "see its README",
                    "-",
                    "no published results.json: not re-run for this table (its README gives the earlier result)",
                    "-",
                    command,
                ]
            )
        for entry in entries:
            rows.append(
                [
                    entry["experiment"],
                    entry["claim"],
                    entry["paper"],
                    entry["ours"],
                    entry["verdict"],
                    command,
                ]
            )
    return rows


def time_line(experiments: Path) -> str:
    """The wall time of the published runs, per experiment and in total (what ``make
    experiments`` spends training them one after the other), from the ``seconds`` of each payload."""
    minutes = {}
    for path in sorted(experiments.glob("*/results.json")):
        runs = json.loads(path.read_text()).get("runs", {})
        if runs:
            minutes[path.parent.name] = sum(payload["seconds"] for payload in runs.values()) / 60
    if not minutes:
        return ""
    parts = ", ".join(f"{name} {value:.0f}" for name, value in minutes.items())
    return (
        f"Wall time of the published runs, one thread per process on the shared 2-core machine: "
        f"{sum(minutes.values()):.0f} min in total ({parts} min); `make experiments` runs them one after the "
        f"other, plus pre-training (minutes, cached) and the experiments not yet re-run."
    )


def reproductions_block(experiments: Path) -> str:
    header = ["experiment", "paper's claim", "paper", "ours (mean ± std)", "verdict", "command"]
    return "\n\n".join(
        filter(
            None, [markdown_table(header, reproduction_rows(experiments)), time_line(experiments)]
        )
    )


def experiment_block(stored: dict) -> str:
    """The results of one experiment's ``results.json``: per recorded run, its table, seeds,
    training time and the verdict rows."""
    parts = []
    for key, payload in stored.get("runs", {}).items():
        seeds = payload.get("plan", {}).get("seeds", [])
        parts.append(
            f"**{key}** — seeds {', '.join(map(str, seeds))}; training time {payload['seconds']:.0f} s "
            f"({provenance(payload)})\n\n{payload['table']}"
        )
    verdicts = [
        f"- {row['experiment']}: **{row['verdict']}**" for row in stored.get("reproduction", [])
    ]
    return "\n\n".join(
        parts
        + (
            [
                "Verdicts (by the rules this README states; the shared one is `experiments/common.py` `verdict`):\n"
                + "\n".join(verdicts)
            ]
            if verdicts
            else []
        )
    )


def provenance(payload: dict) -> str:
    """Where a recorded run trained: threads and processes, the device when recorded (else the
    shared 2-core machine), and the models merged into it from elsewhere."""
    processes = payload.get("jobs") or 1
    text = f"{payload.get('threads') or 'default'} thread(s) per process, {processes} process(es)"
    text += (
        f" on {payload['device']}"
        if payload.get("device")
        else "; the 2-core machine was shared with other work"
    )
    for merge in payload.get("merges", []):
        where = f" on {merge['device']}" if merge.get("device") else ""
        text += (
            f"; {', '.join(merge['models'])} merged in, {merge.get('jobs') or 1} process(es){where}"
        )
    return text


#: block of docs/paper-vs-code.md -> the rows scripts/zsr_defaults.py stored in docs/
ZSR_STUDIES = {
    "zsr-defaults": "zsr_defaults.json",
    "zsr-defaults-he-normal": "zsr_defaults-he_normal.json",
    "zsr-init-76": "zsr_init_76.json",
}


def zsr_study_table(rows: list[dict]) -> str:
    """Test MAP@R and P@1 (x100) per variant, in the order run: mean ± sample std over seeds."""
    variants = list(dict.fromkeys(row["variant"] for row in rows))
    body = []
    for variant in variants:
        cells = [variant]
        for key in ("test_map_at_r", "test_precision_at_1"):
            values = [100 * row[key] for row in rows if row["variant"] == variant]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.mean(values):.2f} ± {spread:.2f}")
        body.append(cells)
    seeds = len({row["seed"] for row in rows})
    note = (
        f"{seeds} seeds, {rows[0]['steps']} steps; generated by `python scripts/readme_tables.py`."
    )
    return markdown_table(["variant", "test MAP@R (%)", "test P@1 (%)"], body) + "\n\n" + note


def update_docs(docs: Path, check: bool) -> list[Path]:
    """Rewrite the ZSR study tables of ``docs/paper-vs-code.md``; returns it when it was stale."""
    page = docs / "paper-vs-code.md"
    if not page.is_file():
        return []
    text = page.read_text()
    updated = text
    for marker, name in ZSR_STUDIES.items():
        if f"<!-- {marker} -->" in updated and (docs / name).is_file():
            rows = json.loads((docs / name).read_text())
            updated = replace_block(updated, marker, zsr_study_table(rows))
    if updated == text:
        return []
    if not check:
        write_atomic(page, updated)
    return [page]


def update_experiment_readmes(experiments: Path, check: bool) -> list[Path]:
    """Rewrite the results block of every experiment README that has one; returns the stale ones."""
    stale = []
    for readme in sorted(experiments.glob("*/README.md")):
        results = readme.parent / "results.json"
        text = readme.read_text()
        if "<!-- results -->" not in text or not results.is_file():
            continue
        updated = replace_block(text, "results", experiment_block(json.loads(results.read_text())))
        if updated != text:
            stale.append(readme)
            if not check:
                write_atomic(readme, updated)
    return stale


def write_atomic(path: Path, text: str) -> None:
    handle, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    with os.fdopen(handle, "w") as file:
        file.write(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/readme_tables.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--demo",
        type=Path,
        default=ROOT / "runs" / "demo" / "summary.json",
        help="summary.json of `gspdml demo`",
    )
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--experiments", type=Path, default=ROOT / "experiments")
    parser.add_argument(
        "--check", action="store_true", help="only report whether the README is up to date"
    )
    args = parser.parse_args(argv)
    original = args.readme.read_text()
    text = original
    if args.demo.is_file():
        text = replace_block(text, "demo-table", demo_block(json.loads(args.demo.read_text())))
    else:
        print(
            f"readme_tables: {args.demo} not found (run `gspdml demo`); the demo table is left as it is",
            file=sys.stderr,
        )
    timings = args.readme.parent / "docs" / "timings.json"
    if timings.is_file():
        text = replace_block(text, "timings", timings_block(json.loads(timings.read_text())))
    text = replace_block(text, "reproductions-table", reproductions_block(args.experiments))
    text = replace_block(text, "reproduce-tables", list_markdown())
    stale = update_experiment_readmes(args.experiments, args.check)
    stale += update_docs(args.readme.parent / "docs", args.check)
    if args.check:
        stale = ([args.readme] if text != original else []) + stale
        print(
            "\n".join(f"{path} differs from the result files" for path in stale)
            or "READMEs are up to date"
        )
        return 1 if stale else 0
    if text != original:
        write_atomic(args.readme, text)
    print("\n".join(f"wrote {path}" for path in [args.readme, *stale]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
