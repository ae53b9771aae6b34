"""The step-0 baseline is scored on the test split the run started on; ``--resume
--allow-data-change`` on a test split that changed then compared the trained model, scored on the
new queries, with that baseline without a word (issue 40 #7: 272 against 256 queries). The
comparison now names the queries each side rests on and says it is not like for like, in the log
and in ``results.json``; a resume on the same data compares as before."""

import json

from gspdml.config import load_config
from gspdml.training import train
from tests.helpers.images import folder_config, image_folder, write_images


def _started_run(tmp_path):
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    config = load_config(folder_config(root, tmp_path / "runs"))
    run_dir = tmp_path / "runs" / "robust"
    train(config, run_dir)
    return root, config, run_dir


def _baseline_lines(text):
    return [line for line in text.splitlines() if "baseline" in line]


def test_a_resume_on_a_changed_test_split_names_both_query_counts(tmp_path, capsys):
    root, config, run_dir = _started_run(tmp_path)
    capsys.readouterr()
    for i, path in enumerate(write_images(tmp_path / "extra", 3, seed=7)):
        path.rename(root / "test" / "c" / f"extra{i}.png")  # 6 -> 9 test queries
    results = train(config, run_dir, resume=True, allow_data_change=True)
    step0 = results["baseline"]["step0"]
    assert (step0["num_queries"], results["test"]["num_queries"]) == (6, 9)

    note = results["baseline_note"]
    assert "step0 on 6 queries" in note and "trained model on 9 queries" in note
    assert "not a like-for-like comparison" in note
    assert json.loads((run_dir / "results.json").read_text())["baseline_note"] == note
    out = capsys.readouterr()
    lines = _baseline_lines(out.out + out.err)
    assert any(" (9 queries) vs step0 " in line and line.endswith(" (6 queries)") for line in lines)
    assert any(note in line for line in lines)


def test_a_test_split_of_the_same_count_but_other_images_is_not_like_for_like(tmp_path, capsys):
    root, config, run_dir = _started_run(tmp_path)
    image = next((root / "test" / "c").iterdir())
    write_images(tmp_path / "other", 1, seed=11)[0].replace(image)  # same name, other pixels
    results = train(config, run_dir, resume=True, allow_data_change=True)
    assert results["baseline"]["step0"]["num_queries"] == results["test"]["num_queries"] == 6
    assert "the test data changed since step 0" in results["baseline_note"]


def test_a_resume_on_the_same_data_compares_as_before(tmp_path, capsys):
    _, config, run_dir = _started_run(tmp_path)
    capsys.readouterr()
    results = train(config, run_dir, resume=True)
    assert "baseline_note" not in results
    out = capsys.readouterr()
    (line,) = _baseline_lines(out.out + out.err)
    assert line.startswith("gspdml: baseline: test map_at_r ") and "queries" not in line
