"""What a bug report needs to know about this machine (``gspdml doctor``), in the spirit of
``python -m torch.utils.collect_env``: the versions of gspdml and the packages it runs on, the
CPU and what it computes natively, the CUDA devices, the state of the native GSP kernels, and the
precision ``trainer.precision: auto`` would pick here, with the reason.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from types import ModuleType

import torch

from gspdml.compat import hardware
from gspdml.version import __version__

#: packages whose installed versions a report names, by distribution (read from their metadata,
#: not imported: a broken install must not break the report that helps to find it)
PACKAGES = (
    "numpy",
    "scipy",
    "safetensors",
    "faiss-cpu",
    "faiss-gpu",
    "timm",
    "torchvision",
    "onnxruntime",
    "pytorch-metric-learning",
)
#: variables that change what the CPU or the kernels do
ENVIRONMENT = (
    "ONEDNN_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
    "OMP_NUM_THREADS",
    "GSPDML_NATIVE",
    "GSPDML_CACHE",
    "CUDA_VISIBLE_DEVICES",
)


def doctor_report() -> dict[str, dict[str, str]]:
    """The report as ``{section: {field: value}}``, every value a string."""
    return {
        "versions": _versions(),
        "cpu": _cpu(),
        "cuda": _cuda(),
        "gspdml": _gspdml(),
        "environment": {name: os.environ.get(name, "(unset)") for name in ENVIRONMENT},
    }


def _versions() -> dict[str, str]:
    versions = {
        "gspdml": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
    }
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _cpu() -> dict[str, str]:
    native, why = hardware.cpu_native_bf16()
    simd = [
        flag
        for flag in ("avx2", "avx512f", "avx512_vnni", *hardware.BF16_FLAGS)
        if flag in hardware.cpu_flags()
    ]
    return {
        "model": hardware.cpu_model(),
        "cores": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "isa flags": ", ".join(simd) or "none of avx2/avx512",
        "torch kernels": hardware.aten_capability(),
        "native bf16": f"{'yes' if native else 'no'}: {why}",
    }


def _cuda() -> dict[str, str]:
    if not torch.cuda.is_available():
        return {
            "devices": f"none (torch {torch.__version__} built for CUDA {torch.version.cuda or '-'})"
        }
    devices = {"runtime": str(torch.version.cuda)}
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        memory = torch.cuda.get_device_properties(index).total_memory / 2**30
        devices[f"cuda:{index}"] = (
            f"{torch.cuda.get_device_name(index)}, compute capability {major}.{minor}, {memory:.0f} GiB"
        )
    return devices


def _gspdml() -> dict[str, str]:
    from gspdml.models.inference import resolve_device
    from gspdml.pooling.gsp import native

    device = resolve_device("auto")
    choice = hardware.auto_precision(device)
    return {
        "native GSP kernels": _native_state(native),
        "default device": str(device),
        "precision auto": f"{choice.precision}: {choice.reason}",
    }


def _native_state(native: ModuleType) -> str:
    if os.environ.get("GSPDML_NATIVE", "1") == "0":
        return "off (GSPDML_NATIVE=0): the torch code runs"
    compiler = native.find_compiler()
    if compiler is None:
        return "off: no C compiler ($CC or cc); the torch code runs"
    if native.library() is None:
        return "off: the build failed (see the warning); the torch code runs"
    return f"loaded (built with {compiler})"


def format_report(report: dict[str, dict[str, str]]) -> str:
    """The report as aligned plain text, one section after another."""
    width = max(len(field) for section in report.values() for field in section)
    lines = []
    for section, fields in report.items():
        lines.append(f"{section}:")
        lines += [f"  {field:<{width}}  {value}" for field, value in fields.items()]
    return "\n".join(lines)
