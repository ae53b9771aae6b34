"""One writer per index folder: while another process writes the index (here: holds its lock),
``gspdml index --append`` fails at once naming the holder and the index keeps every row; the
append then goes through. Before, two appends both reported success and the second save dropped
the first's rows."""

from gspdml.cli import main
from gspdml.retrieval.index import RetrievalIndex
from gspdml.training.run_lock import FolderLock
from tests.helpers.retrieval import write_image_folder, write_run


def test_an_append_to_a_held_index_fails_naming_the_holder(tmp_path, capsys):
    write_image_folder(tmp_path / "images", classes=("red", "green"))
    write_run(tmp_path / "run")
    index = [
        "index",
        str(tmp_path / "run"),
        str(tmp_path / "images"),
        "--out",
        str(tmp_path / "idx"),
    ]
    assert main([*index, "--no-progress"]) == 0
    write_image_folder(tmp_path / "images", classes=("blue",), per_class=4, seed=3)

    writer = FolderLock(tmp_path / "idx", "gspdml index (another process)")
    try:
        assert main([*index, "--append", "--no-progress"]) == 2
    finally:
        writer.release()
    err = capsys.readouterr().err
    assert f"{tmp_path / 'idx'} is being written by pid" in err and "(another process)" in err
    assert len(RetrievalIndex.load(tmp_path / "idx")) == 6

    assert main([*index, "--append", "--no-progress"]) == 0
    assert len(RetrievalIndex.load(tmp_path / "idx")) == 10
