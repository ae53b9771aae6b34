"""A config file is data of bounded size: nested aliases ("billion laughs"), a key given twice
and nesting thousands deep are refused with an error naming the file, by every command that
reads a config (train, config, and run folders read by report, evaluate, bundle). Before, an
800-byte config.yaml made ``report`` expand it without bound, a duplicated key silently took the
last value, and a deep file ended in a RecursionError traceback."""

import time

import pytest

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.config.migration import read_run_config
from gspdml.errors import ConfigError


def _laughs(levels: int = 12) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 8)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_nested_aliases_are_refused_before_anything_walks_them(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(_laughs())
    assert len(path.read_bytes()) < 1200  # 8**12 nodes once expanded
    start = time.monotonic()
    with pytest.raises(
        ConfigError,
        match=r"config.yaml: not valid YAML \(its aliases \(\*name\) expand to more than",
    ):
        load_config(path)
    with pytest.raises(ConfigError, match=r"expand to more than 100000 nodes"):
        read_run_config(path)
    assert time.monotonic() - start < 5


def test_report_of_a_run_folder_with_an_alias_bomb_fails_fast(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text(_laughs())
    (tmp_path / "run" / "model.safetensors").write_bytes(b"")
    assert main(["report", str(tmp_path / "run"), "--no-progress"]) == 2
    assert "expand to more than 100000 nodes" in capsys.readouterr().err


def test_a_key_given_twice_is_refused_naming_it(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("optimizer:\n  lr: 0.1\n  lr: 0.001\n")
    with pytest.raises(ConfigError, match=r"key 'lr' given twice in one mapping.*line 3"):
        load_config(path)


def test_a_config_nested_thousands_deep_is_a_clear_error(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("x: " + "[" * 20000 + "]" * 20000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply to read"):
        load_config(path)


def test_a_few_anchors_still_work(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("description: &d hi\nname: *d\noptimizer: &o {lr: 0.002}\n")
    config = load_config(path)
    assert config.name == "hi" and config.optimizer.lr == 0.002
