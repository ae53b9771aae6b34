"""The choices of ``proxy_nca``/``proxynca_pp``'s ``mixed_targets`` and ``proxy_anchor``'s
``variant`` are declared once, with their types (``Annotated[str, OneOf(...)]``): a value outside
them is refused with the same ``gspdml: error`` from a config and from Python, naming the option
and the allowed values, and every allowed value builds."""

from __future__ import annotations

import pytest
import yaml

from gspdml.cli import main
from gspdml.errors import ConfigError
from gspdml.losses.proxy_anchor import ProxyAnchor
from gspdml.losses.proxy_nca import ProxyNCA, ProxyNCAPlusPlus
from tests.training.conftest import tiny_config

MIXED = "unknown value 'soft'; allowed: generic, interpolated"
CASES = [
    ("proxy_nca", ProxyNCA, "mixed_targets", "soft", MIXED, ("generic", "interpolated")),
    ("proxynca_pp", ProxyNCAPlusPlus, "mixed_targets", "soft", MIXED, ("generic", "interpolated")),
    (
        "proxy_anchor",
        ProxyAnchor,
        "variant",
        "kim",
        "unknown variant 'kim'; allowed: original, thesis_generic",
        ("original", "thesis_generic"),
    ),
]


@pytest.mark.parametrize("name, cls, option, bad, message, allowed", CASES)
def test_a_bad_choice_is_refused_alike_from_a_config_and_from_python(
    tmp_path, capsys, name, cls, option, bad, message, allowed
):
    expected = f"loss.{option}: {message}"
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path, loss={"name": name, option: bad})))
    assert main(["config", str(path)]) == 2
    assert capsys.readouterr().err == f"gspdml: error: {expected}\n"
    with pytest.raises(ConfigError) as refused:
        cls(num_classes=3, embedding_dim=4, **{option: bad})
    assert str(refused.value) == expected
    for value in allowed:
        assert getattr(cls(num_classes=3, embedding_dim=4, **{option: value}), option) == value
