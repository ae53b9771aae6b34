"""The one capability function: which precision ``auto`` picks, on which evidence, and what an
explicit choice does where it is not native. The CPU's flags and torch's CUDA queries are
replaced where a test needs a machine this one is not; the emulation variables are checked in a
real subprocess, where torch reads them at start."""

import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

from gspdml.compat import hardware
from gspdml.errors import ConfigError

AMX_FLAGS = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
AVX2_FLAGS = frozenset({"avx2", "fma"})


@pytest.fixture
def cpu(monkeypatch):
    """Pretend the CPU has the given flags and torch kernels at the given level."""

    def set_cpu(flags, level="AVX512"):
        monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)
        monkeypatch.setattr(hardware, "aten_capability", lambda: level)

    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    return set_cpu


def test_auto_picks_bf16_only_where_the_cpu_has_bf16_units(cpu, monkeypatch):
    cpu(AMX_FLAGS)
    assert hardware.auto_precision("cpu") == hardware.PrecisionChoice(
        "bf16", "the CPU has native bf16 (avx512_bf16, amx_bf16)"
    )
    cpu(AVX2_FLAGS, "AVX2")
    choice = hardware.auto_precision("cpu")
    assert choice.precision == "fp32" and "no avx512_bf16 or amx_bf16" in choice.reason


@pytest.mark.parametrize("cap", ["AVX2", "avx512_core", "AVX512_CORE_VNNI"])
def test_onednn_cap_below_bf16_turns_native_bf16_off(cpu, monkeypatch, cap):
    cpu(AMX_FLAGS)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    native, why = hardware.cpu_native_bf16()
    assert not native and f"ONEDNN_MAX_CPU_ISA={cap.upper()}" in why


@pytest.mark.parametrize("cap", ["AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL"])
def test_onednn_cap_at_or_above_bf16_keeps_it(cpu, monkeypatch, cap):
    cpu(AMX_FLAGS)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert hardware.cpu_native_bf16()[0]


def test_aten_capability_avx2_turns_native_bf16_off(cpu):
    cpu(AMX_FLAGS, "AVX2")
    native, why = hardware.cpu_native_bf16()
    assert not native and "AVX2" in why and "ATEN_CPU_CAPABILITY" in why


@pytest.mark.parametrize(
    "capability, expected",
    [((9, 0), "bf16"), ((8, 0), "bf16"), ((7, 5), "fp16"), ((7, 0), "fp16"), ((6, 1), "fp32")],
)
def test_auto_on_cuda_follows_the_compute_capability(monkeypatch, capability, expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "GPU")
    choice = hardware.auto_precision(torch.device("cuda", 0))
    assert (
        choice.precision == expected
        and f"compute capability {capability[0]}.{capability[1]}" in choice.reason
    )


def test_resolve_names_the_field_and_the_allowed_values():
    with pytest.raises(
        ConfigError, match=r"trainer\.precision.*'fp8'.*allowed: auto, fp32, bf16, fp16"
    ):
        hardware.resolve_precision("fp8", "cpu")
    with pytest.raises(ConfigError, match=r"pretrain\.train\.precision.*fp16 needs a CUDA device"):
        hardware.resolve_precision("fp16", "cpu", field="pretrain.train.precision")


def test_resolve_auto_says_it_chose(cpu):
    cpu(AVX2_FLAGS, "AVX2")
    choice = hardware.resolve_precision("auto", "cpu")
    assert choice.precision == "fp32" and choice.reason.startswith("auto: the CPU has no bf16")
    assert hardware.resolve_precision("fp32", "cpu") == hardware.PrecisionChoice(
        "fp32", "as configured"
    )


def test_explicit_bf16_without_bf16_units_is_kept_and_warns_once_with_a_measured_ratio(
    cpu, monkeypatch
):
    cpu(AVX2_FLAGS, "AVX2")
    monkeypatch.setattr(hardware, "bf16_matmul_slowdown", lambda: 37.0)
    hardware._warn_emulated_bf16.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = hardware.resolve_precision("bf16", "cpu")
        hardware.resolve_precision("bf16", "cpu")
    assert first.precision == "bf16" and first.reason.startswith("as configured, emulated")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "37x slower than float32" in messages[0]
    hardware._warn_emulated_bf16.cache_clear()


def test_explicit_bf16_with_bf16_units_does_not_warn(cpu):
    cpu(AMX_FLAGS)
    hardware._warn_emulated_bf16.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hardware.resolve_precision("bf16", "cpu") == hardware.PrecisionChoice(
            "bf16", "as configured"
        )


def test_the_emulation_variables_turn_bf16_off_in_a_real_process():
    """``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``, as a developer emulates an AVX2-only
    CPU: torch reads them at start, and ``auto`` falls back to fp32 whatever this CPU has."""
    code = (
        "import json; from gspdml.compat import hardware as h; "
        "print(json.dumps([h.aten_capability(), h.auto_precision('cpu').precision]))"
    )
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == ["AVX2", "fp32"]


def test_a_resolved_choice_passes_through_and_auto_is_refused_below_the_entry(cpu, monkeypatch):
    """``PrecisionChoice`` is resolved once where a run starts and passed along: resolving it
    again returns it unchanged, without asking the hardware; the code below the entry takes a
    resolved precision and refuses ``auto`` instead of resolving it a second time."""
    chosen = hardware.PrecisionChoice("bf16", "the run's entry chose it")
    monkeypatch.setattr(hardware, "auto_precision", lambda *_: pytest.fail("resolved again"))
    monkeypatch.setattr(hardware, "cpu_native_bf16", lambda: pytest.fail("asked the CPU again"))
    assert hardware.resolve_precision(chosen, "cpu") is chosen
    assert hardware.precision_name(chosen) == "bf16" and hardware.precision_name("fp16") == "fp16"
    with pytest.raises(
        ConfigError, match=r"precision: 'auto' is not a resolved.*resolve_precision"
    ):
        hardware.precision_name("auto")
    with pytest.raises(ConfigError, match="'float32' is not a resolved precision"):
        hardware.precision_name("float32")
