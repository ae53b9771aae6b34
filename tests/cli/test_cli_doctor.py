"""``gspdml doctor``: the report a bug report needs, and the precision ``auto`` would pick."""

import json
import os
import subprocess
import sys

import torch

from gspdml.cli import main
from gspdml.compat.hardware import auto_precision


def test_doctor_reports_versions_cpu_cuda_kernels_and_the_auto_precision(capsys):
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"versions", "cpu", "cuda", "gspdml", "environment"}
    assert report["versions"]["torch"] == torch.__version__
    assert report["versions"]["python"] == sys.version.split()[0]
    choice = auto_precision("cuda" if torch.cuda.is_available() else "cpu")
    assert report["gspdml"]["precision auto"] == f"{choice.precision}: {choice.reason}"
    assert report["cpu"]["native bf16"].split(":")[0] in ("yes", "no")
    assert report["gspdml"]["native GSP kernels"].split()[0] in ("loaded", "off")


def test_doctor_text_names_every_section_and_the_emulated_cpu():
    """Under the AVX2 emulation the report says no native bf16 and auto = fp32, in plain text."""
    env = {
        **os.environ,
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "GSPDML_NATIVE": "0",
    }
    out = subprocess.run(
        [sys.executable, "-m", "gspdml", "doctor"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for section in ("versions:", "cpu:", "cuda:", "gspdml:", "environment:"):
        assert section in out.splitlines()
    lines = {
        line.split("  ")[1].strip(): line for line in out.splitlines() if line.startswith("  ")
    }
    assert "AVX2" in lines["torch kernels"]
    assert "no:" in lines["native bf16"]
    assert "fp32:" in lines["precision auto"] or torch.cuda.is_available()
    assert "off (GSPDML_NATIVE=0)" in lines["native GSP kernels"]
