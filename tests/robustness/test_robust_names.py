"""Hardening items 10, 19 and 21 (zero queries): hostile file names and empty searches.

* A file name that is not UTF-8 (bytes ``\\xff``) made ``gspdml report`` fail after all its
  embedding work (``UnicodeEncodeError`` writing the page); it is now shown with backslash escapes.
* ``gspdml search`` printed names raw: a newline in a file name forged a result line and an escape
  sequence reached the terminal; names are now printed escaped, one line per result.
* Searching with zero queries failed inside ``torch.cat``; it returns empty results.
"""

import json
import os

import torch

from gspdml.cli import main
from gspdml.errors import printable
from gspdml.retrieval.index import RetrievalIndex
from tests.helpers.retrieval import write_image_folder, write_run

HOSTILE = b"\xff\x1b[31mx\n  9  0.000000  forged"


def _hostile_folder(tmp_path):
    write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=2)
    red = os.fsencode(tmp_path / "images" / "red")
    os.rename(red + b"/0.png", red + b"/" + HOSTILE + b".png")
    write_run(tmp_path / "run")


def _gspdml(capsys, *argv) -> str:
    """``gspdml ARGV`` in this process (its stdout; the exit status must be 0)."""
    code = main([*map(str, argv), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_printable_escapes_control_characters_and_undecodable_bytes():
    name = os.fsdecode(b"a\xffb\x1b[0m\nc\td.png")
    assert printable(name) == "a\\udcffb\\x1b[0m\\nc\\td.png"
    assert printable("caf\u00e9 \u732b.png") == "caf\u00e9 \u732b.png"  # printable text unchanged


def test_report_writes_a_page_for_a_non_utf8_file_name(tmp_path, capsys):
    _hostile_folder(tmp_path)
    out = tmp_path / "report.html"
    _gspdml(capsys, "report", tmp_path / "run", "--images", tmp_path / "images", "--out", out)
    page = out.read_text(encoding="utf-8")
    assert "\\udcff\\x1b[31mx\\n" in page and "\x1b" not in page


def test_search_prints_one_line_per_result_whatever_the_names(tmp_path, capsys):
    _hostile_folder(tmp_path)
    _gspdml(capsys, "index", tmp_path / "run", tmp_path / "images", "--out", tmp_path / "idx")
    query = tmp_path / "images" / "green" / "0.png"
    main(["search", str(tmp_path / "idx"), str(query), "-k", "4"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[0] == f"query: {query}"
    assert not any(line.lstrip().startswith("9 ") for line in lines)  # no forged result line
    assert b"\x1b" not in "\n".join(lines).encode()
    assert sum("\\udcff\\x1b[31mx\\n" in line for line in lines) == 1


def test_searching_zero_queries_returns_empty_results():
    index = RetrievalIndex(torch.randn(5, 4), [f"{i}.png" for i in range(5)], [None] * 5)
    results = index.search(torch.empty(0, 4), 3)
    assert results.indices.shape == (0, 3) and results.rows() == [] and results.format_text() == ""
    left_out = index.search(torch.empty(0, 4), 3, exclude=[])
    assert left_out.distances.shape == (0, 3)


def test_report_on_a_single_image_names_the_problem_before_embedding(tmp_path, capsys):
    """``report`` on one image said "k: must be between 1 and 0"."""
    write_image_folder(tmp_path / "images", classes=("red",), per_class=1)
    write_run(tmp_path / "run")
    command = ["report", str(tmp_path / "run"), "--images", str(tmp_path / "images")]
    assert main([*command, "--out", str(tmp_path / "r.html")]) == 2
    assert not (tmp_path / "r.html").exists()
    err = capsys.readouterr().err
    assert "leave-one-out retrieval needs at least 2 images (images given: 1)" in err


def test_bundle_hashes_a_non_utf8_file_name_of_the_run_data(tmp_path):
    """``gspdml bundle`` hashed the run's file names with strict UTF-8: a name with the byte
    ``\\xff`` raised ``UnicodeEncodeError`` after the weights were read (issue 39 #19). Names are
    hashed as the bytes on disk, so two names differing in that byte hash differently."""
    write_run(tmp_path / "run")
    folder = tmp_path / "run-images"  # the run's data.dataset root (write_run's default)
    write_image_folder(folder, classes=("red", "green", "blue", "grey"), per_class=2)
    red = os.fsencode(folder / "red")
    os.rename(red + b"/0.png", red + b"/\xff.png")
    assert main(["bundle", str(tmp_path / "run"), "--out", str(tmp_path / "b1")]) == 0
    first = json.loads((tmp_path / "b1" / "bundle.json").read_text())["data_hash"]
    os.rename(red + b"/\xff.png", red + b"/\xfe.png")
    assert main(["bundle", str(tmp_path / "run"), "--out", str(tmp_path / "b2")]) == 0
    second = json.loads((tmp_path / "b2" / "bundle.json").read_text())["data_hash"]
    assert first.startswith("sha256:") and second.startswith("sha256:") and first != second


def test_report_leaves_out_a_byte_copy_of_an_image(tmp_path, capsys):
    """``report --images`` ranks leave-one-out: a copy of an image under another name was its
    twin's nearest neighbour (issue 39, sibling of #4). It is left out, and named on stderr."""
    paths = write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=3)
    copy = tmp_path / "images" / "red" / "copy.png"
    copy.write_bytes(paths[1].read_bytes())
    write_run(tmp_path / "run")
    out = tmp_path / "report.html"
    assert (
        main(
            [
                "report",
                str(tmp_path / "run"),
                "--images",
                str(tmp_path / "images"),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert f"gspdml: {copy} is the same image as {paths[1]}; left out" in err
    page = out.read_text(encoding="utf-8")
    assert "6 images" in page and "copy.png" not in page
