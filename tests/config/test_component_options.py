"""Every registered component documents its options in one place: the constructor's signature
(type, default) and the ``Args:`` of its docstrings (meaning); ``docs/configuration.md`` and
``gspdml list KIND --options`` show them."""

from __future__ import annotations

import json
from pathlib import Path

from gspdml.cli import main
from gspdml.config.options import args_section, component_options, component_registries
from gspdml.losses import LOSSES
from gspdml.losses.wrapper import LossWrapper
from gspdml.registry import Registry

REPO = Path(__file__).resolve().parents[2]


def test_every_option_of_every_registered_component_has_a_meaning():
    missing = [  # field: name.option of the library's own components' options without a meaning
        f"{field}: {name}.{option.name}"
        for field, registry in component_registries().items()
        for name in registry.registered_from("gspdml")
        for option in component_options(registry, name)
        if not option.doc
    ]
    assert not missing, "options without an Args: entry in their docstrings:\n" + "\n".join(missing)


def test_the_args_section_is_parsed_with_continuations_and_shared_entries():
    doc = (
        "Summary line.\n\nArgs:\n    alpha: the first,\n        continued.\n"
        "    beta, gamma (int): two at once.\n    delta:\n        on the next line.\n\n"
        "Returns:\n    nothing: not an option.\n"
    )
    assert args_section(doc) == {
        "alpha": "the first, continued.",
        "beta": "two at once.",
        "gamma": "two at once.",
        "delta": "on the next line.",
    }


def test_an_option_reads_type_default_and_doc_from_its_one_declaration():
    options = {o.name: o for o in component_options(LOSSES, "zsr")}
    assert "embedding_dim" not in options and "num_classes" not in options  # the run's
    class_init = options["class_init"]
    assert class_init.kind == "a string or a number" and class_init.default == '"unit"'
    assert class_init.doc.startswith("the initial class embeddings")
    assert options["base"].kind == "a loss spec" and options["base"].default == "required"


def test_a_plugin_subclass_inherits_its_bases_option_docs():
    registry = Registry("loss")

    @registry.register("mine")
    class Mine(LossWrapper):
        """A plugin's wrapper.

        Args:
            strength: how strongly.
        """

        def __init__(self, base, embedding_dim: int, num_classes: int, strength: float = 2.0):
            super().__init__(base, embedding_dim, num_classes)

    options = {o.name: o for o in component_options(registry, "mine")}
    assert options["strength"].doc == "how strongly." and options["strength"].default == "2.0"
    assert options["base"].doc  # documented once, by LossWrapper


def test_the_reference_page_lists_every_component_option():
    page = (REPO / "docs" / "configuration.md").read_text()
    assert "### `loss: zsr`" in page
    assert '| `loss.class_init` | a string or a number | `"unit"` |' in page
    assert "### `model.pooling: gsp`" in page and "### `data.dataset: cub200`" in page


def test_list_options_prints_each_option(capsys):
    assert main(["list", "losses", "zsr", "--options"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("zsr ")
    assert '    class_init: a string or a number, default "unit". the initial class' in out
    assert main(["list", "poolings", "gem", "--options", "--json"]) == 0
    (gem,) = json.loads(capsys.readouterr().out)
    assert {o["name"] for o in gem["options"]} >= {"p", "learn_p", "eps"}


def test_post_processors_list_their_options_under_their_config_names(capsys):
    """A post-processor's option is listed (and documented) by the name a config gives it:
    k-reciprocal's ``lambda``, the dataclass field ``lam``."""
    assert main(["list", "postprocessors", "k_reciprocal", "--options", "--json"]) == 0
    (step,) = json.loads(capsys.readouterr().out)
    options = {o["name"]: o for o in step["options"]}
    assert set(options) == {"k1", "k2", "lambda", "shortlist"}
    assert options["lambda"]["default"] == "0.3" and "original distance" in options["lambda"]["doc"]
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert "| `evaluation.postprocess.lambda` | a number | `0.3` |" in page


def test_list_options_refuses_a_kind_without_options(capsys):
    assert main(["list", "presets", "--options"]) != 0
    assert "--options lists the options of poolings" in capsys.readouterr().err


def test_an_error_inside_a_list_of_losses_names_its_position():
    from gspdml.config import load_config
    from gspdml.errors import ConfigError

    terms = [{"name": "c2"}, {"name": "zsr", "base": "c2", "class_init": "bogus"}]
    overrides = {"model": {"pooling": {"name": "gsp"}}, "data": {"halves": True}, "loss": terms}
    try:
        load_config(overrides)
    except ConfigError as error:
        assert error.field == "loss[1].class_init", error
    else:
        raise AssertionError("a bad class_init inside a list of losses was accepted")
    terms[1]["class_init"] = "unit"
    assert load_config(overrides).loss_names == ("c2", "zsr")
