"""Keep freed host memory in the process on glibc, so CPU training does not page-fault every step.

glibc's ``malloc`` serves large blocks with fresh ``mmap`` pages and returns free heap memory
above ``M_TRIM_THRESHOLD`` to the system, so a step that frees and reallocates the same tensors of
several MiB faults in fresh pages every time (docs/benchmarks.md, ``benchmarks/gsp_layer.py``).
Raising both thresholds keeps the blocks for reuse, at the price of up to ``trim`` bytes of freed
memory kept by the process. Other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters of glibc's <malloc.h>
MMAP_THRESHOLD = 32 << 20  # glibc's maximum (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
TRIM_THRESHOLD = 256 << 20


@functools.cache
def keep_freed_host_memory(
    mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD
) -> bool:
    """Raise glibc's mmap and trim thresholds for this process; ``True`` when it took effect
    (once per process; later calls return the first answer)."""
    library = ctypes.util.find_library("c")
    if library is None:
        return False
    try:
        libc = ctypes.CDLL(library)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(
        mallopt(M_TRIM_THRESHOLD, trim_threshold)
    )
