"""The report's "Best validation round" is the round the trainer selects by: the largest value of
the run's selection metric (``evaluation.metric``, post-processed when
``evaluation.select_postprocessed``) on its rounds' split, the first of equal values, and its
title names that metric. Before, it was the round of the largest ``map_at_r`` whatever the run
selected with, titled "(by map_at_r)"."""

from __future__ import annotations

import html
import json

import pytest

from gspdml.config import dump_config, load_config
from gspdml.evaluation.selection import selection_value
from gspdml.retrieval.report_tables import best_round
from gspdml.settings.sections import EvaluationConfig
from gspdml.training.evaluator import Selection
from tests.helpers.retrieval import run_cli, write_image_folder, write_run

#: map_at_r is best at step 20, precision_at_1 at step 30 (tied with 40), the post-processed
#: map_at_r at step 10; a test-split round and the final test record are never rounds
ROWS = [
    {"step": 5, "split": "train", "loss": 0.5},
    {"step": 10, "split": "val", "map_at_r": 0.2, "precision_at_1": 0.5, "postprocessed_map_at_r": 0.9},
    {"step": 20, "split": "val", "map_at_r": 0.4, "precision_at_1": 0.4, "postprocessed_map_at_r": 0.3},
    {"step": 30, "split": "val", "map_at_r": 0.3, "precision_at_1": 0.7, "postprocessed_map_at_r": 0.2},
    {"step": 40, "split": "val", "map_at_r": 0.1, "precision_at_1": 0.7, "postprocessed_map_at_r": 0.1},
    {"step": 50, "split": "test", "map_at_r": 0.8, "precision_at_1": 0.9},
    {"step": 50, "split": "test", "final": True, "map_at_r": 0.9, "precision_at_1": 0.95},
]  # fmt: skip


def _trainers_choice(evaluation):
    """The step the trainer keeps: its Selection fed each round's selection value in order."""
    selection = Selection(selects=True, patience=None)
    for row in ROWS:
        if row["split"] == evaluation.split and not row.get("final"):
            selection.record(
                selection_value(row, evaluation.metric, evaluation.select_postprocessed),
                row["step"],
            )
    return selection.best_step


@pytest.mark.parametrize(
    "options, key, step",
    [
        ({}, "map_at_r", 20),
        ({"metric": "precision_at_1"}, "precision_at_1", 30),
        ({"select_postprocessed": True}, "postprocessed_map_at_r", 10),
        ({"split": "test", "metric": "precision_at_1"}, "precision_at_1", 50),
    ],
)
def test_the_best_round_is_the_trainers_choice_by_the_runs_selection_metric(options, key, step):
    evaluation = EvaluationConfig(**options)
    title, chosen = best_round(ROWS, evaluation)
    assert chosen["step"] == step == _trainers_choice(evaluation)
    assert not chosen.get("final")
    assert title == f"Best validation round (by {key}, the run's selection metric)"


def test_no_round_of_the_metric_gives_no_table():
    assert best_round(ROWS, EvaluationConfig(metric="nmi_r1_hmean")) is None
    assert best_round([], EvaluationConfig()) is None


def test_the_report_shows_the_round_of_the_runs_selection_metric(tmp_path):
    write_image_folder(tmp_path / "images", classes=("p", "q"), per_class=3)
    run = tmp_path / "run"
    write_run(run)  # its val rounds: map_at_r and precision_at_1 both best at step 100
    config = load_config(run / "config.yaml", ["evaluation.metric=precision_at_1"])
    (run / "config.yaml").write_text(dump_config(config), encoding="utf-8")
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    run_cli("report", run, "--images", tmp_path / "images", "--no-progress")
    page = (run / "report.html").read_text(encoding="utf-8")
    title = html.escape("Best validation round (by precision_at_1, the run's selection metric)")
    assert f"<h3>{title}</h3>" in page
    table = page.split(f"<h3>{title}</h3>")[1].split("</table>")[0]
    assert "<tr><td>step</td><td>30</td></tr>" in table
    assert "(by map_at_r)" not in page
