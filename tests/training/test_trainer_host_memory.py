"""Freed host memory stays in the process (glibc): repeated large allocations stop page-faulting."""

import subprocess
import sys
import textwrap

import pytest

from gspdml.config import load_config
from gspdml.errors import ConfigError

PROGRAM = textwrap.dedent("""
    import ctypes, resource, torch
    from gspdml.training.host_memory import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, keep_freed_host_memory
    libc = ctypes.CDLL("libc.so.6")  # pin glibc's documented defaults (no dynamic adjustment) first
    assert libc.mallopt(M_MMAP_THRESHOLD, 128 << 10) and libc.mallopt(M_TRIM_THRESHOLD, 128 << 10)

    def step():  # like a training step: several activations of a few MiB alive together, then freed
        blocks = [torch.ones(1 << 20) for _ in range(8)]
        del blocks

    def faults():
        for _ in range(3):
            step()
        start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(20):
            step()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start

    default = faults()  # glibc's thresholds as pinned above
    assert keep_freed_host_memory()
    print(default, faults())
""")


def test_kept_memory_is_reused_without_page_faults():
    """One fresh interpreter (glibc's thresholds are per process) measures the page faults of
    20 steps with glibc's default thresholds, then again after ``keep_freed_host_memory``."""
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": ":".join(sys.path), "OMP_NUM_THREADS": "1"},
    )
    default, kept = map(int, out.stdout.split())
    # with glibc's default thresholds every 4 MiB block is a fresh mapping: 20 x 8,192 fresh pages
    assert default > 100_000, default
    assert kept < 1_000, kept


def test_config_option_is_validated():
    assert load_config({"name": "x"})["trainer"]["keep_freed_memory"] is True
    with pytest.raises(ConfigError, match="trainer.keep_freed_memory"):
        load_config({"name": "x", "trainer": {"keep_freed_memory": "yes"}})
