"""The typed run schema: the one source of defaults and checks, its generated reference page,
configs built with ``dataclasses.replace``, and run directories written by release 0.1.0."""

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

import gspdml.config as config_module
from gspdml.cli import main
from gspdml.config import DEFAULTS, RunConfig, dump_config, load_config, preset_names, validated
from gspdml.config.migration import read_run_config
from gspdml.config.reference import render
from gspdml.errors import ConfigError
from gspdml.settings.schema import Section, field_types, option
from tests.presets.loaded import preset

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "run-0.1.0"


# The keys the hand validator of 0.1.0 never checked: each was accepted (bool()-ed or read as
# given) and the run silently got something else than the user wrote.
@pytest.mark.parametrize(
    "override, field, expected",
    [
        ("model.head_bias=maybe", "model.head_bias", "expected true or false"),
        ("data.halves=2", "data.halves", "expected true or false"),
        ("data.replacement=1", "data.replacement", "expected true or false"),
        ("evaluation.restore_best=sometimes", "evaluation.restore_best", "expected true or false"),
        ("optimizer.momentum=fast", "optimizer.momentum", "expected a number in [0, 1)"),
        ("optimizer.momentum=1.5", "optimizer.momentum", "expected a number in [0, 1)"),
        ("optimizer.eps=0", "optimizer.eps", "expected a number > 0"),
        ("model.normalize=maybe", "model.normalize", "expected true or false or one of 'clip'"),
        ("trainer.device=gpu0", "trainer.device", "expected 'auto', 'cpu' or 'cuda[:i]'"),
        ("description=[1]", "description", "expected a string"),
        ("data.eval_transform=3", "data.eval_transform", "expected a mapping or null"),
    ],
)
def test_every_key_is_checked_at_load_time(override, field, expected):
    with pytest.raises(ConfigError) as err:
        load_config("demo-gap", [override])
    assert err.value.field == field and expected in str(err.value)


# An image dataset's recipe options: `gspdml config` accepted them and `train` failed later,
# after reading the data (practitioner issue, CLI traps).
@pytest.mark.parametrize(
    "override, field, expected",
    [
        ("data.dataset.transform=blah", "data.dataset.transform", "unknown recipe 'blah'"),
        ("data.dataset.normalization=blah", "data.dataset.normalization", "unknown normalization"),
        ("data.dataset.crop=-3", "data.dataset.crop", "must be a positive integer"),
        ("data.dataset.resize=0", "data.dataset.resize", "must be a positive integer"),
    ],
)
def test_an_image_recipe_is_checked_at_load_time(tmp_path, override, field, expected):
    with pytest.raises(ConfigError) as err:
        load_config("own-images", [f"data.dataset.root={tmp_path}", override])
    assert err.value.field == field and expected in str(err.value)


def test_the_cli_refuses_an_unchecked_key_of_the_old_validator(tmp_path, monkeypatch, capsys):
    """``gspdml config demo-gap model.head_bias=maybe`` printed a config (and the run got a bias);
    the command's ``main``, in this process: what it prints and returns is the whole check."""
    monkeypatch.chdir(tmp_path)
    assert main(["config", "demo-gap", "model.head_bias=maybe"]) != 0
    printed = capsys.readouterr()
    assert printed.out == ""
    assert "gspdml: error: model.head_bias: expected true or false, got 'maybe'" in printed.err


def test_the_defaults_are_the_schema():
    assert RunConfig().to_dict() == DEFAULTS
    config = load_config({})
    assert config.optimizer.lr == RunConfig().optimizer.lr == DEFAULTS["optimizer"]["lr"]
    assert dataclasses.replace(config, data=RunConfig().data) == RunConfig()


def test_values_are_stored_immutably_and_typed():
    config = load_config({}, ["optimizer.lr=1", "evaluation.recall_at=[1, 5]"])
    assert config.optimizer.lr == 1.0 and isinstance(config.optimizer.lr, float)
    assert config.evaluation.recall_at == (1, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.optimizer.lr = 2.0  # type: ignore[misc]


def test_the_reference_page_is_generated_from_the_schema():
    page = (REPO / "docs" / "configuration.md").read_text()
    assert page == render(), (
        "docs/configuration.md is stale: python -m gspdml.config.reference > docs/configuration.md"
    )
    for key in (
        "model.head_bias",
        "data.eval_transform",
        "schedule.plateau.patience",
        "trainer.precision",
    ):
        assert f"| `{key}` |" in page


def test_a_replaced_config_is_checked_again():
    config = load_config("demo-gap")
    fewer = dataclasses.replace(config, schedule=dataclasses.replace(config.schedule, max_steps=50))
    assert validated(fewer).schedule.max_steps == 50
    broken = dataclasses.replace(config, schedule=dataclasses.replace(config.schedule, max_steps=0))
    with pytest.raises(ConfigError, match="schedule.max_steps: expected an integer >= 1, got 0"):
        validated(broken)


#: PyYAML's safe loader on libyaml's parser where the wheel has it (same constructor and
#: resolver, the parse several times faster; 551 presets' full configs are read back here)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_round_trips_through_its_yaml(name, monkeypatch):
    config = preset(name)
    # the written config is checked from scratch, not found among the configs checked before
    monkeypatch.setattr(config_module, "_CHECKED", type(config_module._CHECKED)())
    assert load_config(yaml.load(dump_config(config), Loader=SAFE_LOADER)) == config


def test_a_base_file_can_update_part_of_a_spec(tmp_path):
    """``model: {pooling: {mu: 0.2}}`` over a base with GSP updated ``mu`` only (it failed with
    "expected a mapping of options, got 0.2")."""
    (tmp_path / "base.yaml").write_text("model:\n  pooling: {name: gsp, num_prototypes: 16}\n")
    (tmp_path / "run.yaml").write_text("base: base.yaml\nmodel:\n  pooling: {mu: 0.2}\n")
    assert load_config(tmp_path / "run.yaml").model.pooling == {
        "name": "gsp",
        "num_prototypes": 16,
        "mu": 0.2,
    }
    (tmp_path / "alone.yaml").write_text("model:\n  pooling: {mu: 0.2}\n")
    with pytest.raises(ConfigError, match="model.pooling"):
        load_config(tmp_path / "alone.yaml")


def test_a_run_directory_of_release_0_1_0_loads(tmp_path):
    """The fixture is a run trained by release 0.1.0 (config.yaml without a header, no
    data.eval_transform, no evaluation.baseline, evaluation.clustering, evaluation.during_warmup,
    schedule.fresh_optimizer_after_warmup, model.init_from nor trainer.compile); it reads back
    with every key it wrote, and its model loads."""
    from gspdml.training import load_run

    written = yaml.safe_load((FIXTURE / "config.yaml").read_text())
    config = read_run_config(FIXTURE / "config.yaml")
    assert config.data.eval_transform is None
    plain = config.to_dict()
    del plain["data"]["eval_transform"]
    assert plain["evaluation"].pop("baseline") is True  # the default fills the absent key
    assert plain["evaluation"].pop("clustering") is False
    assert not plain["evaluation"].pop("metrics")  # none named besides the defaults
    assert plain["trainer"].pop("trackers") == []
    assert plain["model"].pop("init_from") is None
    assert plain["model"].pop("factory") is None
    assert plain.pop("plugins") == []
    assert plain["evaluation"].pop("during_warmup") is True
    assert plain["schedule"].pop("fresh_optimizer_after_warmup") is False
    assert plain["trainer"].pop("compile") is False
    assert plain == written
    run = shutil.copytree(FIXTURE, tmp_path / "run")
    loaded, model = load_run(run)
    assert loaded == config and model.embedding_dim == 16
    assert dump_config(config).startswith("# gspdml ")


def test_a_run_config_with_a_bad_value_names_its_file(tmp_path):
    text = (FIXTURE / "config.yaml").read_text().replace("head_bias: true", "head_bias: maybe")
    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(
        ConfigError, match=r"model.head_bias: .*config.yaml: expected true or false"
    ):
        read_run_config(tmp_path / "config.yaml")


@dataclasses.dataclass(frozen=True)
class _Sized(Section):
    size: "int" = option(1, "a count")


@dataclasses.dataclass(frozen=True)
class _Named(_Sized):
    size: "str" = option("a", "a name: the key of a count above, another type")


def test_each_section_class_checks_by_its_own_field_types():
    """The field types are read once per class (``field_types``): a subclass that gives a key
    another type is checked by its own, before and after its base is, and a section built
    twice is checked the same way twice."""
    for _ in range(2):
        assert _Sized.from_mapping({"size": 3}, "s").size == 3
        assert _Named.from_mapping({"size": "b"}, "n").size == "b"
        with pytest.raises(ConfigError, match=r"n\.size: expected a string, got 3"):
            _Named.from_mapping({"size": 3}, "n")
        with pytest.raises(ConfigError, match=r"s\.size: expected an integer"):
            _Sized.from_mapping({"size": "b"}, "s")
    assert field_types(_Named)["size"] is str and field_types(_Sized)["size"] is int
