"""The core library imports, builds native backbones and trains without torchvision or timm."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

SCRIPT = textwrap.dedent(
    """
    import importlib.abc, sys

    BLOCKED = ("torchvision", "timm", "huggingface_hub")

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"blocked for this test: {name}")
            return None

    sys.meta_path.insert(0, Blocker())

    import torch
    import gspdml, gspdml.models, gspdml.models.pretrained, gspdml.compat.torchvision_shim
    from gspdml.errors import ConfigError
    from gspdml.models import build_embedder
    from gspdml.models.backbones import BACKBONES

    for name in ("bn_inception", "resnet50", "resnet20", "small_cnn"):
        assert name in BACKBONES, name
    model = build_embedder({"backbone": {"name": "resnet20", "freeze_bn": True}, "embedding_dim": 8, "pooling": "gap"}, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(4, 3, 32, 32)).embedding.pow(2).sum(1).sub(1).abs().sum() + model.projection.weight.sum()
    loss.backward()
    optimizer.step()
    try:
        build_embedder({"backbone": {"name": "vit"}, "embedding_dim": 8, "pooling": "gap"}, 3)
    except ConfigError as error:
        print("ERROR:", error)
    print("LOADED:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """
)


def test_core_works_with_torchvision_and_timm_unavailable():
    env = dict(os.environ, PYTHONPATH=str(SRC))
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "LOADED: []" in result.stdout
    assert "ERROR: model.backbone: this backbone needs the optional 'timm' extra" in result.stdout
    assert "gspdml[timm]" in result.stdout
