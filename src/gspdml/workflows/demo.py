"""The main job: train several methods on the embedded collage and print a comparison table.

The table reports, beside the test retrieval metrics, each method's share of pooling weight on
the target tile of the unseen test collages (:mod:`gspdml.analysis.target_share`; "-" for
poolings without spatial weights), the mechanism the GSP paper's Cifar Collage study is about.
``scripts/readme_tables.py`` writes the same table into the README from the run directories.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional

from gspdml.config import load_config, preset_names
from gspdml.errors import ConfigError
from gspdml.output_files import json_text
from gspdml.training.pretrain import resolve_recipe_weights
from gspdml.workflows.runner import PlannedRun, run_planned
from gspdml.workflows.tables import markdown_table

COLUMNS = (
    ("MAP@R", "map_at_r"),
    ("P@1", "precision_at_1"),
    ("R-prec.", "r_precision"),
    ("R@2", "recall_at_2"),
    ("R@4", "recall_at_4"),
)


def demo_configs(paths: Sequence[str]) -> list[str]:
    """The configs given, else the shipped ``demo-*`` presets (sorted by name, so that demo-gsp
    comes before its variant demo-gsp-zsr)."""
    found = list(paths) or [
        n for n in preset_names() if n.startswith("demo-") and not n.endswith("-base")
    ]
    if not found:
        raise ConfigError("configs", "no demo configs given and no demo-* preset is shipped")
    return found


def run_demo(
    paths: Sequence[str], output_dir: Path, overrides: Iterable[str] = (), fresh: bool = False
) -> list[dict[str, Any]]:
    """Train (or resume, or reuse: :mod:`gspdml.workflows.runner`) every config into
    ``output_dir/<name>``, print the table and write its rows to ``output_dir/summary.json``
    (read by ``scripts/readme_tables.py``); ``fresh`` retrains runs that already exist."""
    from gspdml.output_files import atomic_write_text

    rows = []
    earlier = _earlier_seconds(output_dir / "summary.json")
    configs = [
        load_config(path, [*overrides, f"output_dir={output_dir}"]) for path in demo_configs(paths)
    ]
    # pre-train missing backbone weights first: the time column is training only
    for config in configs:
        resolve_recipe_weights(config.model, device=config.trainer.device)
    for config in configs:
        run = PlannedRun(config.name, config, output_dir / config.name)
        outcome = run_planned(run, fresh=fresh, hint="pass --fresh to retrain it")
        reused = outcome.status == "done"
        rows.append(
            {
                "method": config.name,
                "description": config.description,
                "seconds": earlier.get(config.name) if reused else outcome.seconds,
                "reused": reused,
                **outcome.results,
                "target_share": run_target_share(run.run_dir),
            }
        )
    atomic_write_text(output_dir / "summary.json", json_text(rows, indent=2))
    print()
    print(format_table(rows))
    print(
        f"\nrun directories: {output_dir}/<method>  (re-evaluate with: gspdml evaluate {output_dir}/<method>)"
    )
    return rows


def _earlier_seconds(summary: Path) -> dict[str, float]:
    """Training time of each method in an earlier ``summary.json`` (kept for reused runs)."""
    try:
        return {
            row["method"]: row["seconds"]
            for row in json.loads(summary.read_text())
            if row.get("seconds") is not None
        }
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def run_target_share(run_dir: Path) -> Optional[float]:
    """The trained run's mean pooling-weight share on the target tile of the test collages, or
    ``None`` (no spatial weights, or a dataset without target positions)."""
    from gspdml.analysis.target_share import target_tile_share
    from gspdml.data import build_data
    from gspdml.training import load_run

    config, model = load_run(run_dir)
    test = build_data(config.data.dataset, seed=config.seed).test
    grid = getattr(None if test is None else test.query, "tile_grid", None)
    if test is None or grid is None:
        return None  # no collage: no target tile
    return target_tile_share(model, test.query, grid=grid)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of test metrics (x100), one row per method."""
    header = ["method", *(name for name, _ in COLUMNS), "target-tile weight", "steps", "time (s)"]
    body = []
    for row in rows:
        test = row.get("test", {})
        share = row.get("target_share")
        seconds = "" if row["seconds"] is None else f"{row['seconds']:.0f}"
        body.append(
            [
                row["method"],
                *(f"{100 * test[key]:.2f}" if key in test else "-" for _, key in COLUMNS),
                "-" if share is None else f"{share:.2f}",
                str(row["steps"]),
                f"{seconds} (reused)".strip() if row.get("reused") else seconds,
            ]
        )
    return markdown_table(header, body)
