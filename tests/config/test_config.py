import re

import pytest
import torch
import yaml

from gspdml.config import DEFAULTS, PRESETS_DIR, load_config, preset_names
from gspdml.errors import ConfigError


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_defaults_resolve_and_specs_are_canonical():
    config = load_config({"model": {"pooling": "gmp"}, "loss": {"c2": {"neg_margin": 0.5}}})
    assert config["model"]["pooling"] == {"name": "gmp"}
    assert config["loss"] == {"name": "c2", "neg_margin": 0.5}
    assert config["optimizer"]["lr"] == DEFAULTS["optimizer"]["lr"]


def test_bases_merge_in_order_and_a_renamed_spec_replaces_the_old_one(tmp_path):
    write(
        tmp_path,
        "a.yaml",
        {"seed": 1, "loss": {"name": "c2", "neg_margin": 0.7}, "optimizer": {"lr": 0.1}},
    )
    write(tmp_path, "b.yaml", {"base": ["a.yaml"], "seed": 2, "loss": {"c1": {"margin": 0.4}}})
    path = write(tmp_path, "run.yaml", {"base": "b.yaml", "optimizer": {"weight_decay": 0.0}})
    config = load_config(path)
    assert config["seed"] == 2
    assert config["loss"] == {"name": "c1", "margin": 0.4}
    assert config["optimizer"]["lr"] == 0.1 and config["optimizer"]["weight_decay"] == 0.0


def test_presets_load_by_name_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    by_name, by_path = load_config("demo-gsp"), load_config(PRESETS_DIR / "demo-gsp.yaml")
    assert by_name == by_path and by_name["model"]["pooling"]["name"] == "gsp"
    assert (
        load_config("demo-gsp.yaml") == by_name
        and load_config("losses/c2-cub")["loss"]["name"] == "c2"
    )
    assert "demo-gsp" in preset_names() and "losses/c2-cub" in preset_names()


def test_a_local_file_wins_over_the_preset_and_a_user_config_builds_on_a_preset(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "demo-gsp.yaml", {"seed": 7})
    assert load_config("demo-gsp.yaml")["seed"] == 7
    (tmp_path / "sub").mkdir()
    mine = write(
        tmp_path / "sub", "mine.yaml", {"base": "demo-gsp", "seed": 3}
    )  # no demo-gsp.yaml beside it
    config = load_config(mine)
    assert config["seed"] == 3 and config["model"]["pooling"]["name"] == "gsp"


def test_an_unknown_config_names_the_path_and_where_the_presets_are_listed():
    with pytest.raises(
        ConfigError, match=r"config file not found: .*no-such-run.*gspdml list presets"
    ):
        load_config("no-such-run")


def test_same_named_spec_merges_options(tmp_path):
    write(tmp_path, "a.yaml", {"loss": {"name": "c2", "neg_margin": 0.7}})
    path = write(tmp_path, "run.yaml", {"base": ["a.yaml"], "loss": {"c2": {"pos_margin": 0.1}}})
    assert load_config(path)["loss"] == {"name": "c2", "neg_margin": 0.7, "pos_margin": 0.1}


def test_overrides_parse_yaml_values_and_reach_spec_options():
    config = load_config(
        {},
        [
            "optimizer.lr=1e-5",
            "model.pooling=gmp",
            "loss.neg_margin=0.5",
            "evaluation.recall_at=[1, 10]",
        ],
    )
    assert config["optimizer"]["lr"] == 1e-5
    assert config["model"]["pooling"] == {"name": "gmp"}
    assert config["loss"]["neg_margin"] == 0.5
    assert config.evaluation.recall_at == (1, 10)


@pytest.mark.parametrize(
    "data, overrides, field, fragment",
    [
        ({"optimiser": {}}, [], "optimiser", "allowed: name, description"),
        (
            {"optimizer": {"name": "rmsprop"}},
            [],
            "optimizer.name",
            "allowed: adam, adamw, radam, sgd",
        ),
        ({"optimizer": {"lr": -1}}, [], "optimizer.lr", "> 0"),
        ({"model": {"pooling": "avg"}}, [], "model.pooling", "unknown pooling 'avg'; allowed: "),
        (
            {"model": {"pooling": {"gap": {"p": 3}}}},
            [],
            "model.pooling.p",
            "unknown option for 'gap'",
        ),
        (
            {"loss": {"c2": {"margin": 1}}},
            [],
            "loss.margin",
            "allowed: pos_margin, neg_margin, reduction",
        ),
        ({"loss": [{"name": "c1"}, {"name": "nope"}]}, [], "loss[1]", "unknown loss 'nope'"),
        (
            {"data": {"halves": True, "classes_per_batch": 7}},
            [],
            "data.classes_per_batch",
            "must be even",
        ),
        (
            {"evaluation": {"metric": "nmi"}},
            [],
            "evaluation.metric",
            "unknown metric 'nmi'; allowed: map_at_r, precision_at_1, r_precision, nmi_r1_hmean",
        ),
        (
            {"evaluation": {"select_postprocessed": "yes"}},
            [],
            "evaluation.select_postprocessed",
            "expected true or false",
        ),
        (
            {"evaluation": {"select_postprocessed": True}},
            [],
            "evaluation.select_postprocessed",
            "needs post-processing steps in evaluation.postprocess",
        ),
        (
            {
                "evaluation": {
                    "select_postprocessed": True,
                    "postprocess": ["qe"],
                    "metric": "nmi_r1_hmean",
                }
            },
            [],
            "evaluation.select_postprocessed",
            "select post-processed rounds by one of map_at_r, precision_at_1, r_precision",
        ),
        (
            {"trainer": {"precision": "fp8"}},
            [],
            "trainer.precision",
            "allowed: auto, fp32, bf16, fp16",
        ),
        ({"schedule": {"plateau": {"factor": 2}}}, [], "schedule.plateau.factor", "(0, 1)"),
        ({}, ["optimizer.momentumm=0.5"], "optimizer.momentumm", "unknown key"),
        ({}, ["optimizer.lr"], "", "key.sub=value"),
    ],
)
def test_invalid_configs_fail_naming_field_and_allowed_values(data, overrides, field, fragment):
    with pytest.raises(ConfigError) as err:
        load_config(data, overrides)
    assert err.value.field == field
    assert fragment in str(err.value)


def test_selection_options_are_accepted():
    config = load_config({"evaluation": {"metric": "nmi_r1_hmean"}})
    assert (
        config["evaluation"]["metric"] == "nmi_r1_hmean"
        and config["evaluation"]["select_postprocessed"] is False
    )
    config = load_config(
        {}, ["evaluation.postprocess=[qe]", "evaluation.select_postprocessed=true"]
    )
    assert config["evaluation"]["select_postprocessed"] is True


def test_missing_file_and_include_cycle(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    write(tmp_path, "a.yaml", {"base": "b.yaml"})
    write(tmp_path, "b.yaml", {"base": "a.yaml"})
    with pytest.raises(ConfigError, match="include cycle"):
        load_config(tmp_path / "a.yaml")


def test_component_value_errors_surface_at_load_time_with_the_config_path():
    with pytest.raises(ConfigError) as err:
        load_config({"model": {"pooling": {"name": "gsp", "mu": 2}}})
    assert err.value.field == "model.pooling.mu" and "(0, 1]" in str(err.value)


# ------------------------------------------------------------- component options by their types
@pytest.mark.parametrize(
    "override, field, expected",
    [
        ("model.pooling.mu=high", "model.pooling.mu", "a number"),
        ("model.pooling.num_prototypes=abc", "model.pooling.num_prototypes", "an integer"),
        ("model.pooling.num_prototypes=2.5", "model.pooling.num_prototypes", "an integer"),
        ("model.pooling.add_max_pool=1", "model.pooling.add_max_pool", "true or false"),
        ("loss.neg_margin=abc", "loss.neg_margin", "a number"),
        (
            "data.dataset={name: image_folder, root: /tmp, resize: big}",
            "data.dataset.resize",
            "an integer or null",
        ),
        (
            "data.dataset={name: image_folder, root: /tmp, test_fraction: half}",
            "data.dataset.test_fraction",
            "a number",
        ),
        (
            "data.dataset={name: csv, path: x.csv, val_classes: [1, a]}",
            "data.dataset.val_classes",
            "a list of integers or null",
        ),
    ],
)
def test_component_options_are_type_checked_at_config_time(override, field, expected):
    with pytest.raises(ConfigError, match=re.escape(f"{field}: expected {expected}")):
        load_config("demo-gsp", [override])


def test_check_value_follows_the_annotations():
    from collections.abc import Sequence
    from typing import Literal, Optional

    from gspdml.typecheck import check_value

    assert check_value(3, float) and not check_value(True, float) and not check_value(2.0, int)
    assert check_value(None, Optional[int]) and not check_value("a", Optional[int])
    assert (
        check_value([1, 2], Sequence[int])
        and not check_value([1, "2"], list[int])
        and not check_value(1, list[int])
    )
    assert check_value("a", Literal["a", "b"]) and not check_value("c", Literal["a", "b"])
    assert check_value((0.9, 0.99), tuple[float, float]) and check_value(object(), torch.nn.Module)


def test_config_fills_the_dataset_defaults_and_resolves_relative_roots(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config("own-images")
    dataset = config["data"]["dataset"]
    assert dataset["root"] == str(tmp_path / "images")
    assert {k: dataset[k] for k in ("val_fold", "num_folds", "val_classes")} == {
        "val_fold": None,
        "num_folds": 4,
        "val_classes": None,
    }
