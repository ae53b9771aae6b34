"""A plugin in a folder of its own: registered by the ``plugins`` config key and by a
``gspdml.plugins`` entry point, it trains and reloads (evaluate) through the real command line, a
fresh process per command (which imports the plugins from the config, or from the run's record);
in this test process, which had not imported them, it resumes and reloads (report) with the
plugin folder on the path and without it names what to install; ``gspdml check`` runs its
contracts and a constructor's error is a ``gspdml: error``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from gspdml.cli import main as cli_main
from tests.helpers.tiny_runs import tiny_collage_data, tiny_model

POOLING = '''
import torch
from torch import nn

from gspdml.pooling import POOLINGS, Pooled, Pooling, flatten_locations


@POOLINGS.register("lt_attn")
class LearnedTokenAttention(Pooling):
    """Softmax attention of a learned query over the locations."""

    order_free = True

    def __init__(self, in_channels: int, temperature: float = 1.0, dead_bias: bool = False):
        super().__init__(in_channels)
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.query = nn.Parameter(torch.randn(in_channels) / in_channels**0.5)
        self.temperature = temperature
        self.unused = nn.Parameter(torch.zeros(1)) if dead_bias else None

    def out_channels(self) -> int:
        return self.in_channels

    def forward(self, x):
        tokens, _ = flatten_locations(x)
        weights = torch.softmax(tokens @ self.query / self.temperature, dim=1)
        return Pooled((weights.unsqueeze(-1) * tokens).sum(1), None)


@POOLINGS.register("lt_attn_dead")
class DeadBias(LearnedTokenAttention):
    """The bug the contract check catches: a parameter that gets no gradient."""

    def __init__(self, in_channels: int):
        super().__init__(in_channels, dead_bias=True)
'''

LOSS = """
import torch

from gspdml.losses import LOSSES
from gspdml.losses.base import MetricLoss


@LOSSES.register("ep_margin")
class EntryPointMargin(MetricLoss):
    def __init__(self, pos_margin: float = 0.0, neg_margin: float = 0.5):
        super().__init__()
        self.pos_margin, self.neg_margin = pos_margin, neg_margin

    def forward(self, embeddings, labels, output=None):
        d = (2 - 2 * embeddings @ embeddings.T).clamp_min(0)
        same = labels[:, None] == labels[None, :]
        eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
        pos = (d - self.pos_margin).clamp_min(0)[same & ~eye]
        neg = (self.neg_margin - d).clamp_min(0)[~same]
        return pos.mean() + neg.mean()
"""


def plugin_folder(root):
    """``lt_attn_plugin.py`` (named by the config) and an installed distribution ``ep-plugin``
    0.1 whose ``gspdml.plugins`` entry point is ``ep_plugin_mod``."""
    root.mkdir()
    (root / "lt_attn_plugin.py").write_text(POOLING)
    (root / "ep_plugin_mod.py").write_text(LOSS)
    info = root / "ep_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gspdml.plugins]\nmargin = ep_plugin_mod\n")
    (info / "top_level.txt").write_text("ep_plugin_mod\n")
    return root


def config(tmp_path):
    path = tmp_path / "work" / "plug.yaml"
    path.parent.mkdir()
    spec = {
        "name": "plug",
        "output_dir": str(tmp_path / "work" / "runs"),
        "plugins": ["lt_attn_plugin"],
        "data": tiny_collage_data(),
        "model": tiny_model(pooling={"name": "lt_attn", "temperature": 0.5}),
        "loss": {"name": "ep_margin"},
        "schedule": {"max_steps": 4},
        "evaluation": {"split": "test", "every": 2, "patience": None, "recall_at": [1]},
        "trainer": {"progress": False, "tensorboard": False},
    }
    path.write_text(yaml.safe_dump(spec))
    return path


def gspdml(*argv, plugins=None, cwd=None):
    """``python -m gspdml ARGV`` with ``plugins`` (a folder) first on PYTHONPATH."""
    paths = [str(plugins)] if plugins is not None else []
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "gspdml", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


@pytest.mark.slow
def test_a_plugin_in_its_own_folder_trains_resumes_reloads_and_reports(tmp_path, capsys):
    plugins = plugin_folder(tmp_path / "plugin")
    path = config(tmp_path)
    run = tmp_path / "work" / "runs" / "plug"

    trained = gspdml("train", path, plugins=plugins)
    assert trained.returncode == 0, trained.stderr
    recorded = json.loads((run / "environment.json").read_text())["plugins"]
    by_module = {r["module"]: r for r in recorded}
    assert by_module["lt_attn_plugin"]["sha256"].startswith("sha256:")
    assert by_module["ep_plugin_mod"]["version"] == "0.1"
    assert by_module["ep_plugin_mod"]["distribution"] == "ep-plugin"

    evaluated = gspdml("evaluate", run, plugins=plugins)  # a fresh process reloads the plugins
    assert evaluated.returncode == 0, evaluated.stderr

    # in this process, each time as one that has not imported the plugins: a run killed after its
    # last checkpoint resumes to the same weights; the report reloads them from the run's record
    weights = (run / "model.safetensors").read_bytes()
    (run / "model.safetensors").unlink()
    (run / "results.json").unlink()
    with plugin_state_restored(plugins):
        assert cli_main(["train", str(path), "--resume"]) == 0
    assert (run / "model.safetensors").read_bytes() == weights
    with plugin_state_restored(plugins):
        assert cli_main(["report", str(run), "--out", str(tmp_path / "report.html")]) == 0
    assert (tmp_path / "report.html").stat().st_size > 0

    # gspdml without the plugin folder (this process: not on its path) says what to install
    capsys.readouterr()
    with plugin_state_restored():
        assert cli_main(["evaluate", str(run)]) == 2
    assert "plugin module 'ep_plugin_mod': pip install 'ep-plugin==0.1'" in capsys.readouterr().err


def test_gspdml_check_runs_the_contracts_and_a_constructor_error_names_the_component(
    tmp_path, capsys
):
    """In this process, with the plugin folder on the path as the subprocesses have it."""
    plugins = plugin_folder(tmp_path / "plugin")
    path = config(tmp_path)
    with plugin_state_restored(plugins):
        assert cli_main(["check", "lt_attn_plugin"]) == 1  # lt_attn_dead has a dead parameter
        lines = capsys.readouterr().out.splitlines()
        assert "ok   pooling 'lt_attn': gradients reach every parameter and the input" in lines
        assert (
            "FAIL pooling 'lt_attn_dead': gradients reach every parameter and the input: "
            "no gradient for parameter(s) unused"
        ) in lines

        broken = ["train", str(path), "model.pooling.temperature=-1", "name=bad"]
        assert cli_main(broken) == 2
    assert (
        "gspdml: error: model.pooling: pooling 'lt_attn' (lt_attn_plugin.LearnedTokenAttention) "
        "failed: ValueError: temperature must be positive, got -1"
    ) in capsys.readouterr().err


@contextlib.contextmanager
def plugin_state_restored(folder=None):
    """``folder`` (if any) first on ``sys.path``, and afterwards the process's plugin record,
    entry-point flag and registries as they were and the modules of ``folder`` forgotten: a plugin
    imported by an in-process test would otherwise be recorded by every later run of this test
    process (and its runs then ask for it on reload)."""
    from gspdml import plugins
    from gspdml.losses import LOSSES
    from gspdml.models.backbones import BACKBONES
    from gspdml.pooling import POOLINGS

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(plugins, "_IMPORTED", dict(plugins._IMPORTED))
        monkeypatch.setattr(plugins, "_ENTRY_POINTS_LOADED", False)
        for registry in (POOLINGS, LOSSES, BACKBONES):
            monkeypatch.setattr(registry, "_entries", dict(registry._entries))
            monkeypatch.setattr(registry, "_primary", dict(registry._primary))
        if folder is not None:
            monkeypatch.syspath_prepend(str(folder))
        try:
            yield
        finally:
            for name, module in list(sys.modules.items()):
                file = getattr(module, "__file__", None)
                if folder is not None and file and Path(file).parent == Path(folder):
                    del sys.modules[name]


def test_contract_checks_in_process_pass_a_sound_loss_and_name_a_broken_one(tmp_path):
    """``gspdml check``'s checks on a module of the test folder: the entry-point loss passes; a
    loss that returns a vector fails with the reason."""
    from gspdml.workflows.contracts import components_of, run_checks

    folder = plugin_folder(tmp_path / "plugin")
    (folder / "vector_loss_plugin.py").write_text(
        textwrap.dedent(
            """
            from gspdml.losses import LOSSES
            from gspdml.losses.base import MetricLoss

            @LOSSES.register("vector_loss")
            class VectorLoss(MetricLoss):
                def __init__(self, scale: float = 1.0):
                    super().__init__()
                    self.scale = scale

                def forward(self, embeddings, labels, output=None):
                    return self.scale * embeddings.sum(1)
            """
        )
    )
    with plugin_state_restored(folder):
        assert components_of("ep_plugin_mod") == {
            "pooling": [],
            "loss": ["ep_margin"],
            "backbone": [],
        }
        (ok,) = run_checks(components_of("ep_plugin_mod"))
        assert ok.passed, ok.message
        (bad,) = run_checks(components_of("vector_loss_plugin"))
        assert not bad.passed and "not a scalar" in bad.message
