"""What this machine computes fast: the one place that decides a run's numeric precision.

``trainer.precision: auto`` (the default) is resolved by :func:`resolve_precision` once per run,
at its entry (the trainer, ``gspdml evaluate``, a pre-training recipe, a library call of
:func:`gspdml.evaluation.service.evaluate` or :func:`gspdml.evaluation.exact_knn.knn`), to
``bf16`` where bf16 products are native (a CPU with ``avx512_bf16`` or ``amx_bf16``, a CUDA GPU
of compute capability >= 8.0), ``fp16`` with a gradient scaler on compute capability 7.x, and
``fp32`` elsewhere.

A CPU without bf16 units emulates it: on a 2-core AVX2-only EPYC a bf16 1024² matmul was 190x
slower than float32, a convolution's forward + backward 22-26x (``benchmarks/precision.py``). An
explicit ``bf16`` there is kept, with one warning stating the ratio measured here and now
(:func:`bf16_matmul_slowdown`).

The CPU's capability honours ``ONEDNN_MAX_CPU_ISA`` (bf16 needs ``AVX512_CORE_BF16`` or above)
and ``ATEN_CPU_CAPABILITY`` (``avx2`` and ``default`` have no bf16), so
``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2`` emulates a CPU without bf16 anywhere.
"""

from __future__ import annotations

import functools
import os
import platform
import time
import warnings
from dataclasses import dataclass
from typing import Union

import torch

from gspdml.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: the precisions a run computes in, once ``auto`` is resolved
RESOLVED_PRECISIONS = PRECISIONS[1:]
#: the cpuinfo flags of native bf16 dot products
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: oneDNN ISA caps (``ONEDNN_MAX_CPU_ISA``) below the first one with bf16 dot products
ONEDNN_CAPS_WITHOUT_BF16 = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
)
#: torch's own vectorised-kernel levels (``ATEN_CPU_CAPABILITY``) without bf16 instructions
ATEN_LEVELS_WITHOUT_BF16 = ("DEFAULT", "AVX2")


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run uses (``fp32``, ``bf16`` or ``fp16``) and why, in words for a log."""

    precision: str
    reason: str


#: a precision the run's entry resolved, as the code below it takes it: the choice or its name
Precision = Union[PrecisionChoice, str]


def precision_name(precision: Precision, field: str = "precision") -> str:
    """The name (``fp32``, ``bf16``, ``fp16``) of a resolved precision. ``auto`` is refused:
    it is resolved once, where a run starts (:func:`resolve_precision`), and passed along."""
    name = precision.precision if isinstance(precision, PrecisionChoice) else precision
    if name not in RESOLVED_PRECISIONS:
        raise ConfigError(
            field,
            f"{name!r} is not a resolved precision ({', '.join(RESOLVED_PRECISIONS)}); resolve "
            "it once where the run starts: gspdml.compat.hardware.resolve_precision",
        )
    return name


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The feature flags of the first CPU in ``/proc/cpuinfo`` (empty where there is none)."""
    return frozenset(_cpuinfo_field("flags").split())


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    return _cpuinfo_field("model name") or platform.processor() or platform.machine()


def _cpuinfo_field(name: str) -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return ""


def aten_capability() -> str:
    """torch's vectorised-kernel level in effect (``AVX512``, ``AVX2``, ``DEFAULT``, ...), which
    ``ATEN_CPU_CAPABILITY`` can lower."""
    return torch.backends.cpu.get_cpu_capability().upper()


def cpu_native_bf16() -> tuple[bool, str]:
    """Whether this CPU computes bf16 products natively, and why (names the flag or variable)."""
    present = [flag for flag in BF16_FLAGS if flag in cpu_flags()]
    if not present:
        flags = " or ".join(BF16_FLAGS)
        return False, f"the CPU has no bf16 dot products (no {flags} in its flags)"
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if cap in ONEDNN_CAPS_WITHOUT_BF16:
        return False, f"ONEDNN_MAX_CPU_ISA={cap} keeps oneDNN below its bf16 kernels"
    level = aten_capability()
    if level in ATEN_LEVELS_WITHOUT_BF16:
        why = f"torch's CPU kernels run at {level} (ATEN_CPU_CAPABILITY), without bf16 instructions"
        return False, why
    return True, f"the CPU has native bf16 ({', '.join(present)})"


def cuda_precision(device: torch.device) -> PrecisionChoice:
    """What ``auto`` picks on a CUDA device, by its compute capability."""
    major, minor = torch.cuda.get_device_capability(device)
    name = f"{torch.cuda.get_device_name(device)} (compute capability {major}.{minor})"
    if major >= 8:
        return PrecisionChoice("bf16", f"{name} has bf16 tensor cores")
    if major >= 7:
        return PrecisionChoice(
            "fp16",
            f"{name} has fp16 tensor cores but no bf16; a gradient scaler keeps small gradients",
        )
    return PrecisionChoice("fp32", f"{name} has no tensor cores")


def auto_precision(device: torch.device | str = "cpu") -> PrecisionChoice:
    """The precision ``auto`` picks on ``device``: bf16 where it is native, fp16 on CUDA GPUs
    without bf16 tensor cores, fp32 otherwise."""
    device = torch.device(device)
    if device.type == "cuda":
        return cuda_precision(device)
    if device.type != "cpu":
        return PrecisionChoice("fp32", f"{device.type} devices run in fp32")
    native, why = cpu_native_bf16()
    return PrecisionChoice("bf16" if native else "fp32", why)


def resolve_precision(
    requested: Precision, device: torch.device | str = "cpu", field: str = "trainer.precision"
) -> PrecisionChoice:
    """The concrete precision of a run: ``auto`` as :func:`auto_precision` picks it, an explicit
    one as given (fp16 only on CUDA), a :class:`PrecisionChoice` (resolved already) unchanged.
    An explicit ``bf16`` on a CPU without bf16 units is kept and warns once with the slowdown
    measured on this machine."""
    if isinstance(requested, PrecisionChoice):
        return requested
    if requested not in PRECISIONS:
        raise ConfigError(
            field, f"unknown precision {requested!r}; allowed: {', '.join(PRECISIONS)}"
        )
    device = torch.device(device)
    if requested == "auto":
        choice = auto_precision(device)
        return PrecisionChoice(choice.precision, f"auto: {choice.reason}")
    if requested == "fp16" and device.type != "cuda":
        raise ConfigError(
            field, "fp16 needs a CUDA device; use auto (bf16 where the CPU has it, else fp32)"
        )
    if requested == "bf16" and device.type == "cpu" and not cpu_native_bf16()[0]:
        _warn_emulated_bf16()
        return PrecisionChoice("bf16", f"as configured, emulated: {cpu_native_bf16()[1]}")
    return PrecisionChoice(requested, "as configured")


@functools.lru_cache(maxsize=1)
def _warn_emulated_bf16() -> None:
    why = cpu_native_bf16()[1]
    warnings.warn(
        f"precision bf16 on a CPU without bf16 units: {why}; a bf16 matmul measured "
        f"{bf16_matmul_slowdown():.0f}x slower than float32 here. Use precision auto or fp32.",
        RuntimeWarning,
        stacklevel=3,
    )


@functools.lru_cache(maxsize=1)
def bf16_matmul_slowdown(size: int = 256, repeats: int = 3) -> float:
    """Time of a ``size``³ bf16 matmul over its float32 time on this CPU (best of ``repeats``)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    return _best_time(a.bfloat16(), b.bfloat16(), repeats) / _best_time(a, b, repeats)


def _best_time(a: torch.Tensor, b: torch.Tensor, repeats: int) -> float:
    a @ b  # warm-up: kernel selection, first-touch allocation
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def cpu_class() -> str:
    """The CPU's class for timings (what decides this library's speed on it): native bf16 (AMX or
    AVX512-BF16), AVX-512 without bf16, AVX2 only, or older; an emulated class says so."""
    flags = cpu_flags()
    restricted = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("ATEN_CPU_CAPABILITY")
    emulated = " (emulated)" if restricted else ""
    if cpu_native_bf16()[0]:
        return "bf16 (AMX)" if "amx_bf16" in flags else "bf16 (AVX512-BF16)"
    level = aten_capability()
    if level.startswith("AVX512") and "avx512f" in flags:
        return "AVX-512, no bf16" + emulated
    if level == "AVX2" and "avx2" in flags:
        return "AVX2 only" + emulated
    return "no AVX2" + emulated
