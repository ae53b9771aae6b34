"""The verdict column of ``gspdml reproduce``: given only at the preset's schedule on the
benchmark's data, and then within / below / above the paper's band."""

from __future__ import annotations

from gspdml.data.benchmarks import benchmark_check, describe_check
from gspdml.workflows.reproduce.verdict import (
    NOT_BENCHMARK,
    SMOKE,
    cell_verdict,
    row_verdict,
    smoke_keys,
)
from tests.helpers.datasets import make_cub, write_image


def cell(paper, ours, paper_std=None):
    return {"paper": paper, "paper_std": paper_std, "ours": ours}


def test_cells_within_the_papers_band_or_one_point_else_below_or_above():
    assert cell_verdict(cell(27.12, 27.30, 0.27)) == "within"
    assert cell_verdict(cell(27.12, 27.50, 0.27)) == "above"
    assert cell_verdict(cell(27.12, 9.94, 0.27)) == "below"
    assert cell_verdict(cell(60.0, 59.1)) == "within"  # no printed ±: 1 point
    assert cell_verdict(cell(60.0, 58.9)) == "below"
    assert cell_verdict(cell(None, 58.9)) is None and cell_verdict(cell(60.0, None)) is None


def test_row_verdicts_name_the_columns_and_the_reason_for_none():
    # the row: C2+ZSP+GSP on CUB, 9.94 against 27.12 ± 0.27
    far = {"MAP@R": cell(27.12, 9.94, 0.27), "P@1": cell(68.85, 69.0, 0.41)}
    assert row_verdict(far) == "below (1 of 2: MAP@R)"
    close = {"MAP@R": cell(27.12, 27.0, 0.27), "R@1": cell(60.0, 60.5)}
    assert row_verdict(close) == "within the paper's ± / 1 point"
    assert row_verdict({"MAP@R": cell(27.12, 27.0, 0.27)}) == "within the paper's ±"
    assert row_verdict(close, smoke=["schedule.max_steps"]) == SMOKE
    small = {"is_benchmark": False}
    assert row_verdict(close, benchmark=small) == NOT_BENCHMARK
    assert row_verdict({"MAP@R": cell(None, 1.0)}) == "–"


def test_only_keys_that_change_the_weights_make_a_smoke_run():
    preset = "cub-fair-c2-gsp"
    harmless = ["trainer.progress=false", "data.num_workers=0", "trainer.device=cpu"]
    assert smoke_keys(preset, harmless + ["data.dataset.root=/elsewhere"]) == []
    assert smoke_keys(preset, ["schedule.max_steps=8", *harmless]) == ["schedule.max_steps"]


def test_a_small_tree_in_cub_layout_is_named_as_not_the_benchmark(tmp_path):
    make_cub(tmp_path, write_image)
    check = benchmark_check({"name": "cub200", "root": str(tmp_path)})
    assert check is not None and not check["is_benchmark"]
    assert (check["official_images"], check["official_classes"]) == (11788, 200)
    assert check["images"] < 11788 and check["classes"] < 200
    assert describe_check(check).endswith("not CUB-200-2011 (11,788 images, 200 classes)")
    assert benchmark_check({"name": "collage_digits"}) is None
