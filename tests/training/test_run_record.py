"""``environment.json``: the thread counts, CPU, precision and plugin modules of a run; the
report says that another thread count may give other numbers (the trainer does not make CPU
training thread-independent: kernels split their float sums by thread)."""

from __future__ import annotations

import json

import torch

from gspdml.compat.hardware import aten_capability
from gspdml.config import load_config
from gspdml.training import train
from gspdml.training.run_record import determinism_note
from tests.helpers.retrieval import run_cli


def test_a_run_records_threads_cpu_and_precision_and_the_report_says_they_matter(
    make_config, tmp_path, monkeypatch
):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        config = load_config(make_config(schedule={"max_steps": 2}, evaluation={"every": 2}))
        train(config)
    finally:
        torch.set_num_threads(threads)
    run = tmp_path / "runs" / "tiny"
    record = json.loads((run / "environment.json").read_text())
    assert record["threads"]["torch_intra_op"] == 1 and record["threads"]["OMP_NUM_THREADS"] == "1"
    assert record["cpu"]["capability"] == aten_capability()
    assert record["precision"] == "fp32" and record["device"] == "cpu"
    note = determinism_note(record)
    assert note.startswith("Trained with 1 torch threads (OMP_NUM_THREADS=1)")
    assert "another thread count, CPU or precision may give other weights and metrics" in note

    assert run_cli("report", run, "--queries", "2", "-k", "1", "--no-progress") == 0
    page = (run / "report.html").read_text()
    assert '<p class="muted" id="determinism">Trained with 1 torch threads' in page
    map_section = page.split('<h2 id="embedding-map">Embedding map</h2>', 1)[1]
    assert map_section.lstrip().startswith("<svg") and "t-SNE of 48 test embeddings" in map_section
    assert "did not record" in determinism_note(None)
