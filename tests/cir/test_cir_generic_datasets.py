"""The readers of Fashion-IQ, CIRR and CIRCO in their official release layouts
(gspdml.cir.generic_datasets), on tiny generated trees: every query as the JSON files state it,
and a file that is not the layout refused naming the file and the field."""

import json
from pathlib import Path

import pytest

from gspdml.cir.generic_datasets import generic_protocol
from gspdml.errors import DataError
from tests.helpers.generic_cir_release import (
    write_circo,
    write_cirr,
    write_fashioniq,
)


def names_of(paths):
    return [Path(p).stem for p in paths]


def test_fashioniq_queries_rank_their_category_with_the_two_captions(tmp_path):
    written = write_fashioniq(tmp_path)
    protocol = generic_protocol("fashioniq", tmp_path)
    database = names_of(protocol.database)
    assert database == [n for names, _ in written.values() for n in names]
    queries = iter(protocol.queries)
    for category, (names, entries) in written.items():
        for entry in entries:
            query = next(queries)
            assert query.group == category
            reference = protocol.query_images[query.image]
            assert Path(reference).stem == entry["candidate"]
            assert [database[i] for i in query.positives] == [entry["target"]]
            ranked = sorted(set(range(len(database))) - set(query.excluded.tolist()))
            assert [database[i] for i in ranked] == names  # its category's gallery only
            first, second = entry["captions"]
            assert query.text == f"{first.rstrip('.')} and {second}"
    assert next(queries, None) is None


def test_cirr_excludes_the_reference_and_keeps_its_image_set(tmp_path):
    names, entries = write_cirr(tmp_path)
    protocol = generic_protocol("cirr", tmp_path)
    database = names_of(protocol.database)
    assert database == names
    assert len(protocol.queries) == len(entries)
    for query, entry in zip(protocol.queries, entries):
        assert Path(protocol.query_images[query.image]).stem == entry["reference"]
        assert query.text == entry["caption"]
        assert [database[i] for i in query.positives] == [entry["target_hard"]]
        assert [database[i] for i in query.excluded] == [entry["reference"]]
        members = set(entry["img_set"]["members"]) - {entry["reference"]}
        assert sorted(database[i] for i in query.subset) == sorted(members)
        assert len(query.subset) == 5


def test_circo_has_every_ground_truth_as_positive(tmp_path):
    ids, entries = write_circo(tmp_path)
    protocol = generic_protocol("circo", tmp_path)
    database = [int(name) for name in names_of(protocol.database)]
    assert database == ids
    for query, entry in zip(protocol.queries, entries):
        assert int(Path(protocol.query_images[query.image]).stem) == entry["reference_img_id"]
        assert query.text == entry["relative_caption"]
        assert sorted(database[i] for i in query.positives) == sorted(entry["gt_img_ids"])
        assert len(query.excluded) == 0


def rewrite(path, change):
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


@pytest.mark.parametrize(
    ("benchmark", "file", "change", "message"),
    [
        (
            "fashioniq",
            "FashionIQ/captions/cap.shirt.val.json",
            lambda v: v[1].pop("target"),
            "cap.shirt.val.json: entry 1: field 'target' must be a non-empty string, got None",
        ),
        (
            "fashioniq",
            "FashionIQ/captions/cap.dress.val.json",
            lambda v: v[0].update(captions=["one"]),
            "cap.dress.val.json: entry 0: field 'captions' must be a list of two sentences",
        ),
        (
            "fashioniq",
            "FashionIQ/captions/cap.toptee.val.json",
            lambda v: v[2].update(candidate="B00nowhere"),
            "cap.toptee.val.json: entry 2: field 'candidate': 'B00nowhere' is not in "
            "split.toptee.val.json",
        ),
        (
            "cirr",
            "CIRR/cirr/captions/cap.rc2.val.json",
            lambda v: v[3]["img_set"].update(members="dev-0-0-img0"),
            "cap.rc2.val.json: entry 3: field 'img_set.members' must be a list of image names",
        ),
        (
            "cirr",
            "CIRR/cirr/captions/cap.rc2.val.json",
            lambda v: v[0].update(reference="dev-9-9-img9"),
            "cap.rc2.val.json: entry 0: field 'reference': 'dev-9-9-img9' is not in "
            "split.rc2.val.json",
        ),
        (
            "circo",
            "CIRCO/annotations/val.json",
            lambda v: v[4].update(gt_img_ids=[]),
            "val.json: entry 4: field 'gt_img_ids' must be a list of image ids holding "
            "target_img_id",
        ),
        (
            "circo",
            "CIRCO/annotations/val.json",
            lambda v: v[1].update(reference_img_id="12"),
            "val.json: entry 1: field 'reference_img_id' must be an integer, got '12'",
        ),
        (
            "circo",
            "CIRCO/COCO2017_unlabeled/annotations/image_info_unlabeled2017.json",
            lambda v: v["images"][0].update(file_name="nowhere.jpg"),
            "image_info_unlabeled2017.json: entry 0: field 'file_name':",
        ),
    ],
)
def test_a_bad_release_file_is_named_with_its_field(tmp_path, benchmark, file, change, message):
    {"fashioniq": write_fashioniq, "cirr": write_cirr, "circo": write_circo}[benchmark](tmp_path)
    rewrite(tmp_path / file, change)
    with pytest.raises(DataError) as error:
        generic_protocol(benchmark, tmp_path)
    assert message in str(error.value)
    assert str(tmp_path / file) in str(error.value)


def test_missing_files_and_folders_are_named(tmp_path):
    with pytest.raises(DataError, match="CIRCO does not exist"):
        generic_protocol("circo", tmp_path)
    write_fashioniq(tmp_path)
    (tmp_path / "FashionIQ" / "captions" / "cap.shirt.val.json").unlink()
    with pytest.raises(DataError, match=r"cap\.shirt\.val\.json: file not found"):
        generic_protocol("fashioniq", tmp_path)
    write_cirr(tmp_path)
    (tmp_path / "CIRR" / "cirr" / "captions" / "cap.rc2.val.json").write_text("[{")
    with pytest.raises(DataError, match=r"cap\.rc2\.val\.json: not a readable JSON file"):
        generic_protocol("cirr", tmp_path)
    split = tmp_path / "CIRR" / "cirr" / "image_splits" / "split.rc2.val.json"
    rewrite(split, lambda v: v.update({"dev-0-0-img0": "./dev/0/gone.png"}))
    with pytest.raises(DataError, match="image 'dev-0-0-img0': './dev/0/gone.png' is not a file"):
        generic_protocol("cirr", tmp_path)
    # a path that leaves the benchmark's folder is refused, even when the file is there
    (tmp_path / "outside.png").write_bytes(
        (tmp_path / "CIRR" / "dev" / "0" / "dev-0-1-img1.png").read_bytes()
    )
    rewrite(split, lambda v: v.update({"dev-0-0-img0": "../outside.png"}))
    with pytest.raises(DataError, match="'../outside.png' is not a path inside"):
        generic_protocol("cirr", tmp_path)


def test_the_command_reports_a_bad_release_file_as_a_gspdml_error(tmp_path, capsys):
    from gspdml.cli import main

    write_circo(tmp_path)
    rewrite(tmp_path / "CIRCO" / "annotations" / "val.json", lambda v: v[2].pop("relative_caption"))
    argv = ["cir", "freedom", "--images", str(tmp_path), "--dataset", "circo", "--method", "text"]
    assert main([*argv, "--model", "python:tests.helpers.cir_tiny_clip:build", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gspdml: error") and "val.json: entry 2: field 'relative_caption'" in err
