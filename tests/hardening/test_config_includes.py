"""A config's ``base`` includes, as a received or mistyped config gives them: a value that is not
a file name (a number, a null, a mapping) is refused naming the file and the field. Before,
``base: 5`` and ``base: [null]`` failed with a bare ``TypeError``, ``base: {a: 1}`` looked
for a preset named after the mapping's key, and ``base: false`` or ``base: 0`` was ignored. A
chain of includes a thousand deep blamed a file in the middle of it ("not valid YAML (nested too
deeply)"); now a chain longer than MAX_INCLUDE_DEPTH is refused naming its first file."""

import pytest

from gspdml.config import load_config
from gspdml.config.loading import MAX_INCLUDE_DEPTH, MAX_INCLUDED_FILES
from gspdml.errors import ConfigError


@pytest.mark.parametrize(
    "value", ["5", "[null]", "{a: 1}", "[other.yaml, 3]", "['']", "true", "false", "0"]
)
def test_a_base_that_is_not_file_names_is_refused_naming_the_file(tmp_path, value):
    (tmp_path / "other.yaml").write_text("seed: 3\n")
    config = tmp_path / "run.yaml"
    config.write_text(f"base: {value}\nseed: 1\n")
    with pytest.raises(ConfigError, match=r"^base: .*run\.yaml: expected a config file or preset"):
        load_config(config)


def test_a_base_in_a_mapping_is_checked_the_same_way():
    with pytest.raises(ConfigError, match=r"^base: expected a config file or preset name.*got 5"):
        load_config({"base": 5})


def test_a_list_of_bases_is_merged_in_order(tmp_path):
    (tmp_path / "a.yaml").write_text("seed: 3\nname: from-a\n")
    (tmp_path / "b.yaml").write_text("seed: 4\n")
    (tmp_path / "run.yaml").write_text("base: [a.yaml, b.yaml]\n")
    config = load_config(tmp_path / "run.yaml")
    assert (config.seed, config.name) == (4, "from-a")


def _chain(folder, length):
    """``c0.yaml`` includes ``c1.yaml`` ... includes ``c{length-1}.yaml`` (which sets the seed)."""
    for i in range(length):
        text = f"base: c{i + 1}.yaml\n" if i < length - 1 else "seed: 5\n"
        (folder / f"c{i}.yaml").write_text(text)
    return folder / "c0.yaml"


def test_an_include_chain_too_long_names_its_first_file_not_a_yaml_error(tmp_path):
    with pytest.raises(
        ConfigError, match=rf"^base: .*c0\.yaml includes files {MAX_INCLUDE_DEPTH} deep"
    ):
        load_config(_chain(tmp_path, 1200))


def test_an_include_chain_as_long_as_allowed_loads(tmp_path):
    assert load_config(_chain(tmp_path, MAX_INCLUDE_DEPTH)).seed == 5


def test_bases_repeated_at_every_level_are_refused_before_they_multiply(tmp_path):
    """Three files listing 20 bases each read the last one 8,000 times (1,000 each: 10**9, a
    day); the files one config reads are counted, and more than MAX_INCLUDED_FILES refused."""
    (tmp_path / "c.yaml").write_text("seed: 3\n")
    (tmp_path / "b.yaml").write_text("base: [" + ", ".join(["c.yaml"] * 20) + "]\n")
    (tmp_path / "a.yaml").write_text("base: [" + ", ".join(["b.yaml"] * 20) + "]\n")
    (tmp_path / "run.yaml").write_text("base: [" + ", ".join(["a.yaml"] * 20) + "]\n")
    with pytest.raises(
        ConfigError, match=rf"^base: .*run\.yaml includes more than {MAX_INCLUDED_FILES} files"
    ):
        load_config(tmp_path / "run.yaml")


def test_a_base_listed_a_few_times_still_loads(tmp_path):
    (tmp_path / "c.yaml").write_text("seed: 3\n")
    (tmp_path / "run.yaml").write_text("base: [c.yaml, c.yaml, c.yaml]\nname: x\n")
    assert load_config(tmp_path / "run.yaml").seed == 3
