"""Temporary files and folders have unique names (issue 39, siblings of defects 1 and 2): a
writer never writes through, nor removes, a fixed-name temporary that another process, or the
user, put beside its output.

Before, two processes saving one ``RetrievalResults`` file shared the temporary ``OUT.tmp`` (the
second one's rename failed with ``FileNotFoundError``), and ``gspdml bundle`` removed whatever
folder was called ``OUT.tmp`` with ``rmtree``.
"""

import os

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation import results as results_module
from gspdml.evaluation.results import RetrievalResults
from gspdml.retrieval.bundle import write_bundle
from gspdml.workflows.runner import PlannedRun, run_planned
from tests.helpers.retrieval import write_run


def _results(seed: int) -> RetrievalResults:
    generator = torch.Generator().manual_seed(seed)
    distances = torch.rand(4, 3, generator=generator).sort(dim=1).values
    indices = torch.stack([torch.randperm(5, generator=generator)[:3] for _ in range(4)])
    return RetrievalResults.from_labels(indices, distances, [0, 1, 0, 1], [0, 1, 0, 1, 2])


def test_two_writers_of_one_results_file_do_not_collide(tmp_path, monkeypatch):
    """A second save of the same file runs while the first one's temporary is written (two
    processes interleaved): both saves finish and the file is whole."""
    out = tmp_path / "results.safetensors"
    real = results_module.save_file
    calls = []

    def interleaved(tensors, filename, metadata=None):
        real(tensors, filename, metadata=metadata)
        calls.append(filename)
        if len(calls) == 1:
            _results(2).save(out)  # the other writer, between this one's write and its rename

    monkeypatch.setattr(results_module, "save_file", interleaved)
    _results(1).save(out)
    assert len(calls) == 2 and calls[0] != calls[1]
    assert torch.equal(RetrievalResults.load(out).indices, _results(1).indices)  # renamed last
    assert sorted(os.listdir(tmp_path)) == ["results.safetensors"]


def test_a_bundle_never_removes_a_folder_named_like_its_temporary(tmp_path):
    write_run(tmp_path / "run")
    mine = tmp_path / "bundle.tmp"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept\n")
    write_bundle(tmp_path / "run", tmp_path / "bundle")
    assert (mine / "notes.txt").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "bundle.tmp", "run"]


def test_bundle_overwrite_replaces_a_bundle_only(tmp_path):
    """issue 39, sibling of defect 2: ``--overwrite`` never removes a folder of the user's."""
    write_run(tmp_path / "run")
    mine = tmp_path / "photos"
    mine.mkdir()
    (mine / "holiday.jpg").write_bytes(b"kept")
    with pytest.raises(ConfigError, match=r"photos is not a gspdml bundle .*choose another --out"):
        write_bundle(tmp_path / "run", mine, overwrite=True)
    assert (mine / "holiday.jpg").read_bytes() == b"kept"
    write_bundle(tmp_path / "run", tmp_path / "bundle")
    write_bundle(tmp_path / "run", tmp_path / "bundle", overwrite=True)  # a bundle: replaced


def test_a_fresh_run_never_deletes_a_folder_that_holds_no_run(tmp_path):
    """issue 39, sibling of defect 2: ``fresh=True`` (``gspdml demo --fresh``) deletes a run's
    folder, not a folder of the user's files that happens to have the run's name."""
    config = write_run(tmp_path / "elsewhere")
    mine = tmp_path / "run"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept\n")
    with pytest.raises(ConfigError, match=r"run holds files but no gspdml run .*not deleted"):
        run_planned(PlannedRun("run", config, mine), fresh=True)
    assert (mine / "notes.txt").read_text() == "kept\n"
