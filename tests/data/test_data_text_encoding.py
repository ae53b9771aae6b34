"""The text files of datasets (CSV lists of images, vocabularies, annotation lists) are UTF-8
with or without a byte-order mark; another encoding or a runaway field is an error naming the
file, the line and the fix. Before, a spreadsheet's "CSV UTF-8" was refused as
``got ['\\ufeffpath', 'label']``, and a Latin-1 file or a 200,000-character field escaped as a raw
``UnicodeDecodeError`` / ``_csv.Error``."""

from typing import NamedTuple

import pytest

from gspdml.cir.freedom import read_vocabulary
from gspdml.cir.queries import read_query_csv as _read_csv
from gspdml.data import build_data
from gspdml.data.folder import read_csv_rows
from gspdml.data.textfiles import read_columns
from gspdml.errors import DataError


class _ListLine(NamedTuple):
    path: str
    label: str


def _list(tmp_path, write_image):
    """A CSV list of six images in three classes, as text."""
    rows = ["path,label"]
    for label in ("café", "b", "c"):
        for k in range(2):
            write_image(tmp_path / f"{label}{k}.png", seed=k)
            rows.append(f"{label}{k}.png,{label}")
    return "\r\n".join(rows) + "\r\n"


def test_a_csv_with_a_byte_order_mark_is_read_as_without(tmp_path, write_image):
    text = _list(tmp_path, write_image)
    (tmp_path / "plain.csv").write_text(text, encoding="utf-8")
    (tmp_path / "bom.csv").write_text(text, encoding="utf-8-sig")
    assert (tmp_path / "bom.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    assert read_csv_rows(tmp_path / "bom.csv") == read_csv_rows(tmp_path / "plain.csv")
    data = build_data({"name": "csv", "path": str(tmp_path / "bom.csv"), "val_fraction": 0}, seed=0)
    assert sorted(data.train.class_names + data.test.query.class_names) == ["b", "c", "café"]
    (tmp_path / "q.csv").write_text("image,text\r\nb0.png,red\r\n", encoding="utf-8-sig")
    assert _read_csv(str(tmp_path / "q.csv"), ("image", "text")) == [
        {"image": "b0.png", "text": "red"}
    ]
    (tmp_path / "oi.csv").write_text("LabelName,DisplayName\n/m/1,Tortoise\n", encoding="utf-8-sig")
    assert read_vocabulary(tmp_path / "oi.csv") == ["Tortoise"]


@pytest.mark.parametrize(
    "read",
    [
        lambda p: read_csv_rows(p),
        lambda p: _read_csv(str(p), ("path", "label")),
        lambda p: read_vocabulary(p),
        lambda p: read_columns(p, _ListLine, "list", skip=1),
    ],
    ids=["image-list", "cir-list", "vocabulary", "index-file"],
)
def test_a_latin1_file_is_refused_naming_file_line_byte_and_fix(tmp_path, write_image, read):
    path = tmp_path / "latin1.csv"
    path.write_bytes(_list(tmp_path, write_image).replace(",", " ").encode("latin-1"))
    with pytest.raises(DataError) as error:
        read(path)
    message = str(error.value)
    assert f"{path}:2: not UTF-8 text (byte 0xe9 at column 4)" in message
    assert "save the file as UTF-8" in message and "iconv -f latin1 -t utf-8" in message


def test_a_field_over_the_csv_limit_is_refused_naming_the_line_where_it_starts(tmp_path):
    path = tmp_path / "runaway.csv"
    path.write_text('path,label\na.png,1\n"b.png,2\n' + "c.png,3\n" * 20_000, encoding="utf-8")
    for read in (read_csv_rows, lambda p: _read_csv(str(p), ("path", "label"))):
        with pytest.raises(DataError) as error:
            read(path)
        message = str(error.value)
        assert f"{path}:3: malformed CSV (field larger than field limit (131072))" in message
        assert 'a quote (") that is never closed' in message
    path.write_text("path,label\n" + "x" * 131_073 + ".png,1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"runaway.csv:2: malformed CSV \(field larger"):
        read_csv_rows(path)


def test_index_file_rows_are_typed_and_an_int_column_is_checked(tmp_path):
    """``read_columns`` gives one ``NamedTuple`` per line, its ``int`` fields parsed; a
    non-integer there is an error naming the file, line, column and value."""

    class Line(NamedTuple):
        id: int
        path: str

    path = tmp_path / "images.txt"
    path.write_text("1 a/x.jpg\n\n2 b/y.jpg\n", encoding="utf-8")
    assert read_columns(path, Line, "list") == [Line(1, "a/x.jpg"), Line(2, "b/y.jpg")]
    path.write_text("1 a/x.jpg\n2.5 b/y.jpg\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"images.txt:2: column id must be an integer, got '2.5'"):
        read_columns(path, Line, "list")
