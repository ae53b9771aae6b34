import pytest

from gspdml.errors import ConfigError
from gspdml.registry import Registry, parse_spec


def test_parse_spec_forms():
    assert parse_spec("gap", "f") == ("gap", {})
    assert parse_spec({"name": "gsp", "mu": 0.3}, "f") == ("gsp", {"mu": 0.3})
    assert parse_spec({"gsp": {"mu": 0.3}}, "f") == ("gsp", {"mu": 0.3})
    assert parse_spec({"gsp": None}, "f") == ("gsp", {})
    with pytest.raises(ConfigError, match="f: expected"):
        parse_spec(3, "f")


def test_registry_errors_name_field_and_allowed_values():
    reg = Registry("thing")

    @reg.register("a")
    class A:
        supplied_by_caller = ("size",)

        def __init__(self, size, alpha=1.0):
            self.size, self.alpha = size, alpha

    with pytest.raises(ConfigError) as err:
        reg.build("b", "model.thing")
    assert "model.thing" in str(err.value) and "allowed: a" in str(err.value)
    with pytest.raises(
        ConfigError, match=r"model.thing.beta: unknown option for 'a'; allowed: alpha"
    ):
        reg.build({"a": {"beta": 2}}, "model.thing", size=3)
    with pytest.raises(ConfigError, match="model.thing.size"):
        reg.check({"a": {"size": 2}}, "model.thing")
    built = reg.build({"name": "a", "alpha": 2}, "model.thing", size=3, unused=1)
    assert (built.size, built.alpha) == (3, 2)
