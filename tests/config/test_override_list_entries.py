"""An override addresses an entry of a list by its position, ``loss[1].base.neg_margin=0.3``:
the key by which ``gspdml diff`` and the ``--resume`` check name an option of a list of losses
(:func:`gspdml.training.component_options.option_keys`) and validation names its field, so a
printed key pasted back as ``key=value`` sets that option. Before, ``loss[1]`` was an unknown
key: the printed key could not be used. An entry given by name (``c2``) or in the named form
(``{xbm: {...}}``), and a wrapper's ``base`` given by name, are brought to ``{name: ...,
**options}`` on the way to the option."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gspdml.cli import build_parser, main, parse
from gspdml.config import dump_config, load_config
from gspdml.errors import ConfigError
from gspdml.training.component_options import write_options
from gspdml.workflows.run_diff import diff_runs, diff_text

A = {"name": "a", "loss": ["c2", {"name": "xbm", "base": "c2", "weight": 0.5}]}
B = {
    "name": "a",
    "loss": [
        {"name": "c2", "pos_margin": 0.1},
        {
            "name": "xbm",
            "base": {"name": "c2", "neg_margin": 0.3},
            "weight": 0.5,
            "memory_batches": 3,
        },
    ],
}


def _run_folder(folder: Path, source, overrides=()) -> Path:
    """A run folder as far as ``gspdml diff`` reads it: config.yaml and components.json."""
    config = load_config(source, overrides)
    folder.mkdir()
    (folder / "config.yaml").write_text(dump_config(config))
    write_options(folder, config)
    return folder


def _changes(text: str, section: str) -> list[tuple[str, str]]:
    """``(key, new value)`` of each ``section: key: old -> new (delta)`` line of the diff."""
    out = []
    for line in text.splitlines():
        if line.startswith(f"{section}: ") and " -> " in line:
            key, change = line[len(section) + 2 :].split(": ", 1)
            out.append((key, change.split(" -> ")[1].split(" (")[0]))
    return out


def test_the_keys_gspdml_diff_prints_set_the_options_when_pasted_back(tmp_path):
    a, b = _run_folder(tmp_path / "a", A), _run_folder(tmp_path / "b", B)
    printed = _changes(diff_text(diff_runs(a, b)), "components")
    assert sorted(key for key, _ in printed) == [
        "loss[0].pos_margin",
        "loss[1].base.neg_margin",
        "loss[1].memory_batches",
    ]
    overrides = [f"{key}={value}" for key, value in printed]
    assert load_config(a / "config.yaml", overrides) == load_config(b / "config.yaml")
    pasted = _run_folder(tmp_path / "pasted", a / "config.yaml", overrides)
    assert diff_text(diff_runs(pasted, b)).splitlines()[:2] == ["config: same", "components: same"]


def test_the_field_validation_names_takes_the_fix(tmp_path):
    terms = [{"name": "c2"}, {"name": "zsr", "base": "c2", "class_init": "bogus"}]
    config = {"model": {"pooling": {"name": "gsp"}}, "data": {"halves": True}, "loss": terms}
    with pytest.raises(ConfigError) as error:
        load_config(config)
    assert error.value.field == "loss[1].class_init"
    fixed = load_config(config, [f"{error.value.field}=unit"])
    assert fixed.loss[1] == {"name": "zsr", "base": "c2", "class_init": "unit"}


def test_the_command_line_takes_a_list_entry_override(tmp_path, capsys):
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump({"loss": ["c2", {"xbm": {"base": "c2", "weight": 0.5}}]}))
    assert main(["config", str(path), "loss[1].base.neg_margin=0.3", "loss[1].weight=2"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["loss"][0] == "c2"  # an entry no override enters stays as written
    assert printed["loss"][1] == {
        "name": "xbm",
        "base": {"name": "c2", "neg_margin": 0.3},
        "weight": 2,
    }


def test_a_list_entry_override_is_an_override_after_a_many_valued_option():
    argv = ["protocol", "fair", "demo-gsp", "--seeds", "0", "1", "loss[1].base.neg_margin=0.3"]
    args = parse(build_parser(), argv)
    assert args.seeds == [0, 1] and args.overrides == ["loss[1].base.neg_margin=0.3"]


@pytest.mark.parametrize(
    "override, field, message",
    [
        ("loss[2].margin=1", "loss[2]", "loss has 2 entries \\(0 to 1\\)"),
        ("model[0].pooling=gem", "model", "model is not a list"),
        ("loss.margin=1", "loss.margin", "its parent is not a mapping"),
        ("loss[x].margin=1", "loss[x].margin", "key\\[i\\].sub for the entry i of a list"),
        ("loss[0]].margin=1", "loss[0]].margin", "key\\[i\\].sub for the entry i of a list"),
        ("loss[1].bogus=1", "loss[1].bogus", "unknown option for 'xbm'"),
    ],
)
def test_a_key_that_names_no_entry_is_refused_naming_it(override, field, message):
    with pytest.raises(ConfigError, match=message) as error:
        load_config(A, [override])
    assert error.value.field == field
