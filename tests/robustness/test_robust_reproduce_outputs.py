"""``gspdml reproduce`` checks where it writes before any training (issue 39, defect 12).

Before, ``--output-dir`` naming a file failed with a raw ``NotADirectoryError``, and
``OUT/tables`` (or ``OUT/tables/TABLE.md``) being a file or folder of the wrong kind failed with
a ``FileExistsError`` after all the training. Now each is a ``gspdml: error`` naming the path,
before the first model trains.
"""

import pytest

from gspdml.cli import main
from tests.workflows.test_reproduce import SMOKE, _tiny_cub


@pytest.fixture
def no_training(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("trained before checking where the table goes")

    monkeypatch.setattr("gspdml.workflows.reproduce.run.run_protocol", refuse)


@pytest.mark.parametrize("blocked", ["output-dir", "tables", "table-file"])
def test_an_output_that_cannot_be_written_is_named_before_training(
    tmp_path, capsys, no_training, blocked
):
    data, out = _tiny_cub(tmp_path / "data"), tmp_path / "out"
    if blocked == "output-dir":
        out.write_text("a file")
        named = f"{out} is a file"
    elif blocked == "tables":
        out.mkdir()
        (out / "tables").write_text("a file")
        named = f"{out / 'tables'}: it is a file"
    else:
        (out / "tables" / "gsp-table3a.md").mkdir(parents=True)
        named = f"{out / 'tables' / 'gsp-table3a.md'}: it is a folder"
    argv = ["reproduce", "gsp-table3a", "--rows", "cub/*", "--seeds", "0"]
    argv += ["--data-root", str(data), "--output-dir", str(out), *SMOKE]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gspdml: error: cannot write") and named in err, err
