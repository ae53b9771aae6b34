"""An experiment script's ``main`` run in the test process on a fresh import of the script, as a
process of its own would run it, without the cost of starting one (an interpreter importing
torch and gspdml again)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import pytest

from gspdml.data.base import DATASETS
from gspdml.evaluation.postprocess import POSTPROCESSORS
from gspdml.losses.base import LOSSES
from gspdml.models.backbones.base import BACKBONES
from gspdml.pooling.base import POOLINGS
from tests.helpers.experiments import load_common, load_experiment

REGISTRIES = (DATASETS, POSTPROCESSORS, LOSSES, BACKBONES, POOLINGS)


@contextlib.contextmanager
def script_registrations_undone() -> Iterator[None]:
    """Every component registry without the components that experiment scripts registered (their
    modules are ``exp_*``, :func:`tests.helpers.experiments.load_experiment`) while scripts are
    imported again, and every registry and the scripts' data choice (``common.CHOICE``) as they
    were afterwards: a script registers its components when it is imported (zero_shot_attributes:
    its dataset), and another test of this process may have imported it already."""
    common = load_common()
    with pytest.MonkeyPatch.context() as patch:
        for registry in REGISTRIES:
            kept = {
                key: factory
                for key, factory in registry._entries.items()
                if not getattr(factory, "__module__", "").startswith("exp_")
            }
            patch.setattr(registry, "_entries", kept)
            patch.setattr(
                registry, "_primary", {k: v for k, v in registry._primary.items() if k in kept}
            )
        patch.setattr(common, "CHOICE", common.CHOICE)
        yield


def run_script(name: str, argv: Sequence[str]) -> tuple[ModuleType, Any, str]:
    """``experiments/<name>/run.py``, imported afresh, runs ``main(argv)``: the module, the exit
    code (``None`` when ``main`` returned) and what it printed on stdout and stderr."""
    with script_registrations_undone():
        module = load_experiment(name)
        text = io.StringIO()
        code = None
        try:
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
                module.main(list(argv))
        except SystemExit as exit_:
            code = exit_.code
    return module, code, text.getvalue()
