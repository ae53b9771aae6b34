"""``gspdml export RUN_DIR`` without ``--out`` writes into the run's own ``export/`` folder, never
through a link there. Before, a received run whose ``export`` was a symbolic link to another
folder had ``embedder.pt`` and its sidecar written into that folder. An export whose sidecar
(``FILE.json``) cannot be written is refused before the work; before, the model file was
replaced and the sidecar write failed after it, leaving a model beside another export's record."""

import os

import pytest

from gspdml.output_files import OutputError
from gspdml.retrieval.export import export_run
from tests.helpers.retrieval import write_run


def test_an_export_folder_that_is_a_link_out_of_the_run_is_refused(tmp_path):
    write_run(tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "run" / "export")
    with pytest.raises(OutputError, match=r"run/export is a symbolic link .*outside"):
        export_run(tmp_path / "run", "torchscript", check=False)
    assert list(outside.iterdir()) == []


def test_an_explicit_out_is_written_where_the_user_says(tmp_path):
    write_run(tmp_path / "run")
    path, line = export_run(tmp_path / "run", "torchscript", out=tmp_path / "e" / "m.pt")
    assert path == tmp_path / "e" / "m.pt" and path.is_file()
    assert (tmp_path / "e" / "m.pt.json").is_file() and "max |difference|" in line


def test_a_sidecar_that_cannot_be_written_is_refused_before_the_export(tmp_path):
    write_run(tmp_path / "run")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "m.pt.json").mkdir()  # a folder where the sidecar goes
    with pytest.raises(OutputError, match=r"cannot write .*m\.pt\.json: it is a folder"):
        export_run(tmp_path / "run", "torchscript", out=tmp_path / "e" / "m.pt")
    assert not (tmp_path / "e" / "m.pt").exists()  # no export without its sidecar
