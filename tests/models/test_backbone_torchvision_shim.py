"""The torchvision CPU shim: active exactly when a plain `import torchvision` is broken, and then it fixes it."""

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def run(code):
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_shim_is_needed_exactly_when_plain_import_fails_and_makes_models_work():
    plain = run("import torchvision")
    shimmed = run(
        "import torch\n"
        "from gspdml.compat import torchvision_shim as shim\n"
        "tv = shim.import_torchvision()\n"
        "print('ACTIVE', shim._LIBRARY is not None, shim.torch_is_cpu_build())\n"
        "print('SHAPE', tuple(tv.models.resnet18().eval()(torch.randn(1, 3, 32, 32)).shape))\n"
        "import timm\n"
        "print('TIMM', timm.__version__)\n"
    )
    assert shimmed.returncode == 0, shimmed.stderr
    active = "ACTIVE True" in shimmed.stdout
    assert active == (plain.returncode != 0)
    if active:
        assert "torchvision::nms does not exist" in plain.stderr
        assert "True" in shimmed.stdout.split("ACTIVE")[1].split()[1]  # only on CPU torch
    assert "SHAPE (1, 1000)" in shimmed.stdout and "TIMM" in shimmed.stdout
