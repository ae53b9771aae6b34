"""``gspdml evaluate RUN --images DIR|CSV`` and ``--query --gallery``: any labelled folder or CSV
list, read as ``gspdml index`` reads folders, scored like a split of the run. The printed
metrics equal an independent evaluation (numpy loops and scikit-learn) of the embeddings the
run's :class:`~gspdml.retrieval.encoder.Encoder` gives the same files."""

import csv
import json
import shutil

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from gspdml.cli import main
from gspdml.errors import ConfigError, DataError
from gspdml.retrieval.encoder import Encoder
from tests.helpers.retrieval import run_cli, write_image_folder, write_run

#: one coloured class and two grey ones (told apart by a bright square only): metrics below 1
CLASSES = ("red", "grey_a", "grey_b")


#: the whole-ranking mAP, which :func:`independent` also computes, is reported when asked for
WHOLE_RANKING = ("--metrics", "mean_average_precision")


def evaluate_command(capsys, run_dir, *options):
    capsys.readouterr()
    assert run_cli("evaluate", run_dir, "--no-progress", *options) == 0
    return json.loads(capsys.readouterr().out)


def independent(run_dir, query, query_labels, gallery=None, gallery_labels=None):
    """P@1, MAP@R and the full mAP of the Encoder's embeddings by loops over float64 distances
    (ties broken by index for P@1 and MAP@R; none occur in these images)."""
    encoder = Encoder(run_dir, device="cpu")
    q = encoder([str(p) for p in query]).double().numpy()
    loo = gallery is None
    g = q if loo else encoder([str(p) for p in gallery]).double().numpy()
    g_labels = np.array(query_labels if loo else gallery_labels)
    p1, map_r, aps = [], [], []
    for i, label in enumerate(query_labels):
        d = ((g - q[i]) ** 2).sum(1)
        keep = np.arange(len(g)) != i if loo else np.ones(len(g), bool)
        relevant = g_labels[keep] == label
        order = np.argsort(d[keep], kind="stable")
        hits = relevant[order]
        r = int(relevant.sum())
        precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
        p1.append(float(hits[0]))
        map_r.append(float((precision[:r] * hits[:r]).sum() / r))
        aps.append(average_precision_score(relevant, -d[keep]))
    return {
        "precision_at_1": np.mean(p1),
        "map_at_r": np.mean(map_r),
        "mean_average_precision": np.mean(aps),
    }


def labels_of(paths):
    return [p.parent.name for p in paths]


@pytest.fixture
def run_dir(tmp_path):
    write_run(tmp_path / "run")
    return tmp_path / "run"


def test_a_labelled_folder_is_evaluated_leave_one_out(tmp_path, run_dir, capsys):
    paths = write_image_folder(tmp_path / "shop", CLASSES, per_class=4, seed=1)
    (tmp_path / "shop" / ".DS_Store").write_bytes(b"\0")
    printed = evaluate_command(
        capsys, run_dir, "--images", tmp_path / "shop", "--metrics", "mean_average_precision"
    )
    assert printed["images"] == str(tmp_path / "shop") and "split" not in printed
    assert "mean_average_precision" in printed["metrics"]["computed"]
    assert "mean_reciprocal_rank" in printed["metrics"]["not_computed"]
    expected = independent(run_dir, paths, labels_of(paths))
    for key, value in expected.items():
        assert printed[key] == pytest.approx(value, rel=1e-9), key
    assert printed["num_queries"] == 12 and printed["mean_average_precision"] < 1


def test_a_csv_query_list_against_a_gallery_folder(tmp_path, run_dir, capsys):
    gallery = write_image_folder(tmp_path / "gallery", CLASSES, per_class=3, seed=2)
    query = write_image_folder(tmp_path / "lists" / "photos", CLASSES, per_class=2, seed=3)
    with open(tmp_path / "lists" / "query.csv", "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["path", "label"])
        rows.writerows([p.relative_to(tmp_path / "lists"), p.parent.name] for p in query)
    printed = evaluate_command(
        capsys,
        run_dir,
        "--query",
        tmp_path / "lists" / "query.csv",
        "--gallery",
        tmp_path / "gallery",
        "--metrics",
        "mean_average_precision",
    )
    expected = independent(run_dir, query, labels_of(query), gallery, labels_of(gallery))
    for key, value in expected.items():
        assert printed[key] == pytest.approx(value, rel=1e-9), key
    assert printed["num_queries"] == 6 and printed["map_at_r"] < 1


def test_wrong_image_options_name_the_fix(tmp_path, run_dir):
    write_image_folder(tmp_path / "shop", per_class=2)
    with pytest.raises(ConfigError, match="--split"):
        run_cli("evaluate", run_dir, "--split", "test", "--images", tmp_path / "shop")
    with pytest.raises(ConfigError, match="--gallery"):
        run_cli("evaluate", run_dir, "--query", tmp_path / "shop")
    write_image_folder(tmp_path / "loose", classes=("red",), per_class=2)
    (tmp_path / "loose" / "red" / "0.png").rename(tmp_path / "loose" / "stray.png")
    with pytest.raises(DataError, match="outside any class folder"):
        run_cli("evaluate", run_dir, "--no-progress", "--images", tmp_path / "loose")
    (tmp_path / "split.csv").write_text("path,label,split\nshop/red/0.png,red,test\n")
    with pytest.raises(ConfigError, match="split column"):
        run_cli("evaluate", run_dir, "--no-progress", "--images", tmp_path / "split.csv")


def test_a_query_set_that_is_the_gallery_is_evaluated_leave_one_out(tmp_path, run_dir, capsys):
    """``--query X --gallery X`` ranked each query's own image first (P@1 = 1.0, issue 39 #3):
    the same images, as one folder or as a copy under other names, are evaluated leave-one-out,
    and the report says so."""
    paths = write_image_folder(tmp_path / "shop", CLASSES, per_class=4, seed=1)
    expected = independent(run_dir, paths, labels_of(paths))
    assert expected["precision_at_1"] < 1
    shutil.copytree(tmp_path / "shop", tmp_path / "copy")
    for copy in (tmp_path / "copy").rglob("*.png"):
        copy.rename(copy.with_name("c" + copy.name))  # other names, the same bytes
    for gallery in (tmp_path / "shop", tmp_path / "copy"):
        printed = evaluate_command(
            capsys, run_dir, "--query", tmp_path / "shop", "--gallery", gallery, *WHOLE_RANKING
        )
        assert printed["protocol"] == "leave-one-out" and printed["num_queries"] == 12
        for key, value in expected.items():
            assert printed[key] == pytest.approx(value, rel=1e-9), key


def test_a_query_partly_in_the_gallery_is_refused_naming_an_image(tmp_path, run_dir):
    query = write_image_folder(tmp_path / "query", CLASSES, per_class=2, seed=1)
    write_image_folder(tmp_path / "gallery", CLASSES, per_class=3, seed=2)
    shutil.copy(query[0], tmp_path / "gallery" / "red" / "copy.png")
    with pytest.raises(DataError) as error:
        run_cli(
            "evaluate",
            run_dir,
            "--no-progress",
            "--query",
            tmp_path / "query",
            "--gallery",
            tmp_path / "gallery",
        )
    message = str(error.value)
    assert "1 of the 6 query images are also in the gallery" in message
    assert f"{query[0]} is the same image as {tmp_path / 'gallery' / 'red' / 'copy.png'}" in message
    assert "would find itself at rank 1" in message and "--images" in message


def test_an_image_listed_twice_is_evaluated_once_or_refused(tmp_path, run_dir, capsys):
    """A CSV listing an image twice, or a folder holding a copy of one, gave that image its twin
    as nearest neighbour (issue 39 #4): the CSV is refused naming both lines; a copy under
    another name is left out (and counted in the report); a copy under another label is refused."""
    paths = write_image_folder(tmp_path / "shop", CLASSES, per_class=4, seed=1)
    rows = ["path,label"] + [f"{p.relative_to(tmp_path)},{p.parent.name}" for p in paths]
    (tmp_path / "twice.csv").write_text("\n".join([*rows, rows[3]]) + "\n")
    with pytest.raises(
        DataError, match=r"twice.csv:14: shop/red/2.png is listed again \(first on line 4\)"
    ):
        run_cli("evaluate", run_dir, "--no-progress", "--images", tmp_path / "twice.csv")

    shutil.copy(paths[2], tmp_path / "shop" / "red" / "copy.png")
    printed = evaluate_command(capsys, run_dir, "--images", tmp_path / "shop", *WHOLE_RANKING)
    assert printed["duplicates_left_out"] == 1 and printed["num_queries"] == 12
    expected = independent(run_dir, paths, labels_of(paths))
    for key, value in expected.items():
        assert printed[key] == pytest.approx(value, rel=1e-9), key

    shutil.move(tmp_path / "shop" / "red" / "copy.png", tmp_path / "shop" / "grey_a" / "copy.png")
    with pytest.raises(DataError, match="is the same image as .*an image has one class"):
        run_cli("evaluate", run_dir, "--no-progress", "--images", tmp_path / "shop")


def test_images_without_a_second_image_of_any_class_are_an_error_not_nan(tmp_path, run_dir, capsys):
    """Every class one image: ``evaluate`` printed ``NaN`` metrics (not JSON) with exit 0 and
    ``num_queries: 0`` (issue 39 #8)."""
    write_image_folder(tmp_path / "lone", CLASSES, per_class=1)
    with pytest.raises(DataError, match="no query to score: no class has two of the images"):
        run_cli("evaluate", run_dir, "--no-progress", "--images", tmp_path / "lone")
    write_image_folder(tmp_path / "other", ("blue", "green"), per_class=2)
    assert (
        main(
            [
                "evaluate",
                str(run_dir),
                "--no-progress",
                "--query",
                str(tmp_path / "lone"),
                "--gallery",
                str(tmp_path / "other"),
            ]
        )
        == 2
    )
    out, err = capsys.readouterr()
    assert (
        out == "" and "gspdml: error: no query to score: no query's class is in the gallery" in err
    )
