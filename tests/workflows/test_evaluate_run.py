"""``evaluate_run``, the library function behind ``gspdml evaluate``: a run's weights scored on
labelled images (or a split of its dataset) with the run's own settings. The metrics equal an
independent evaluation of the run's Encoder embeddings (numpy loops, scikit-learn)."""

import shutil

import pytest

from gspdml.errors import ConfigError
from gspdml.workflows.evaluate_run import evaluate_run, labelled_images
from tests.evaluation.test_evaluate_images import CLASSES, independent, labels_of
from tests.helpers.retrieval import write_image_folder, write_run


def test_labelled_images_are_scored_as_an_independent_evaluation(tmp_path):
    write_run(tmp_path / "run")
    paths = write_image_folder(tmp_path / "shop", CLASSES, per_class=4, seed=1)
    shutil.copy(paths[2], tmp_path / "shop" / "red" / "copy.png")
    notes: list[str] = []
    result = evaluate_run(
        tmp_path / "run",
        images=tmp_path / "shop",
        note=notes.append,
        device="cpu",
        metrics=["mean_average_precision"],
        progress=False,
    )
    assert result["run"] == str(tmp_path / "run") and result["weights"] == "final"
    assert result["images"] == str(tmp_path / "shop") and result["protocol"] == "leave-one-out"
    assert result["duplicates_left_out"] == 1 and len(notes) == 1
    assert notes[0].endswith("; left out") and "copy.png is the same image as" in notes[0]
    assert "mean_average_precision" in result["metrics"]["computed"]
    expected = independent(tmp_path / "run", paths, labels_of(paths))
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, rel=1e-9), key
    assert result["num_queries"] == 12


def test_the_images_given_must_be_one_of_the_two_forms():
    assert labelled_images(None) == {}
    assert labelled_images(None, query="q", gallery="g") == {"query": "q", "gallery": "g"}
    with pytest.raises(ConfigError, match="give either --split or labelled images") as error:
        labelled_images("test", images="shop")
    assert error.value.field == "--split"
    with pytest.raises(ConfigError, match="--images: give either --images .*or --query"):
        labelled_images(None, images="shop", query="q")
    with pytest.raises(ConfigError, match="--gallery: --query and --gallery go together"):
        labelled_images(None, query="q")
    with pytest.raises(ConfigError, match="--query: --query and --gallery go together"):
        labelled_images(None, gallery="g")
