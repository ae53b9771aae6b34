"""A component option has one name, the key a user writes in a config or an override
(``loss.pos_margin``, ``loss.base.pos_margin``): ``gspdml diff`` and the ``--resume`` check name a
changed option alike (``gspdml diff`` used to name it as ``components.json`` stores it,
``loss.options.pos_margin``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gspdml.config import dump_config, load_config
from gspdml.errors import ConfigError
from gspdml.training.component_options import check_same_options, write_options
from gspdml.training.run_dir import CONFIG_FILE
from gspdml.workflows.run_diff import diff_runs, diff_text
from tests.training.conftest import tiny_config


def _run_folder(folder: Path, config: Any) -> Path:
    """A run folder holding what a resume and a diff read: ``config.yaml``, ``components.json``."""
    folder.mkdir()
    (folder / CONFIG_FILE).write_text(dump_config(config))
    write_options(folder, config)
    return folder


XBM = {"name": "xbm", "base": {"name": "c2", "neg_margin": 0.5}, "start_step": 0}


@pytest.mark.parametrize(
    ("loss", "changed", "key"),
    [
        ({"name": "c2", "neg_margin": 0.5}, {"pos_margin": 0.1}, "loss.pos_margin"),
        (XBM, {"base": {**XBM["base"], "pos_margin": 0.1}}, "loss.base.pos_margin"),
    ],
)
def test_diff_and_resume_name_a_changed_option_by_its_config_key(tmp_path, loss, changed, key):
    old = load_config(tiny_config(tmp_path, loss=loss))
    new = load_config(tiny_config(tmp_path, loss={**loss, **changed}))
    run_a = _run_folder(tmp_path / "a", old)
    run_b = _run_folder(tmp_path / "b", new)

    components = diff_runs(run_a, run_b)["components"]
    assert components == {key: (0.0, 0.1)}
    assert f"components: {key}: 0.0 -> 0.1 (+0.1)" in diff_text({"components": components})

    with pytest.raises(ConfigError, match=rf"\({re.escape(key)}: 0\.0 -> 0\.1\)"):
        check_same_options(run_a, new)  # the resume of run A with B's options
    # the key is what an override sets: B's config with ``key=0.0`` resumes run A
    check_same_options(
        run_a, load_config(tiny_config(tmp_path, loss={**loss, **changed}), [f"{key}=0.0"])
    )
    assert diff_runs(run_a, run_a)["components"] == {}
