"""Native (C) kernels of the GSP transport: ``transport.c``, compiled on first use and cached.

They replace the solver loop of :func:`~gspdml.pooling.gsp.transport.solve_log` and the
elementwise part of the fused backward (:mod:`gspdml.pooling.gsp.fused`) for contiguous float32
CPU tensors, where torch mostly dispatches small operations. The first use compiles them
(``$CC``, else ``cc``; ``-O3 -march=native``) into ``$XDG_CACHE_HOME/gspdml``, keyed by source,
flags and CPU. Without a compiler, or with ``GSPDML_NATIVE=0``, :func:`library` returns ``None``
and callers run the torch code, which the tests compare with the kernels.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Optional

import torch

from gspdml.compat.hardware import cpu_flags

SOURCE = Path(__file__).with_name("transport.c")
FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-std=c11", "-fPIC", "-shared")
_FLOAT_P = ctypes.POINTER(ctypes.c_float)
_I64, _F, _INT = ctypes.c_int64, ctypes.c_float, ctypes.c_int
SIGNATURES = {
    "gsp_solve": (
        _INT,
        [_FLOAT_P, _I64, _I64, _I64, _F, _F, _I64, _INT, _F, _FLOAT_P, _FLOAT_P, _FLOAT_P],
    ),
    "gsp_backward": (None, [_FLOAT_P] * 9 + [_I64, _I64, _I64, _F, _F, _F] + [_FLOAT_P] * 6),
}


@functools.lru_cache(maxsize=1)
def library() -> Optional[ctypes.CDLL]:
    """The compiled kernels, or ``None`` (no compiler, ``GSPDML_NATIVE=0``, or a failed build,
    which is reported once as a warning)."""
    compiler = find_compiler()
    if os.environ.get("GSPDML_NATIVE", "1") == "0" or compiler is None:
        return None
    try:
        lib = ctypes.CDLL(str(_build(compiler)))
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", None) or err
        warnings.warn(
            f"gspdml: the native GSP kernels did not build ({detail}); using the torch code",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    for name, (result, arguments) in SIGNATURES.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = result, arguments
    return lib


def find_compiler() -> Optional[str]:
    """The C compiler the kernels are built with: ``$CC``, else ``cc``, if it is on the path."""
    return shutil.which(os.environ.get("CC", "cc"))


def eligible(*tensors: torch.Tensor) -> bool:
    """Whether the kernels can take these tensors: contiguous float32 on the CPU, and no autograd
    recording through them (the kernels have no backward of their own)."""
    recording = torch.is_grad_enabled()
    return all(
        t.device.type == "cpu"
        and t.dtype == torch.float32
        and t.is_contiguous()
        and not (recording and t.requires_grad)
        for t in tensors
    )


def pointer(tensor: Optional[torch.Tensor]) -> Optional[ctypes._Pointer[ctypes.c_float]]:
    """A ``float *`` to a contiguous float32 tensor (NULL for ``None``)."""
    return None if tensor is None else ctypes.cast(tensor.data_ptr(), _FLOAT_P)


def _build(compiler: str) -> Path:
    source = SOURCE.read_bytes()
    identity = [source, " ".join(FLAGS).encode(), compiler.encode(), _cpu().encode()]
    key = hashlib.sha256(b"\0".join(identity)).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gspdml"
    target = cache / f"transport-{key}{'.dylib' if platform.system() == 'Darwin' else '.so'}"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as folder:  # build aside, then move in
            built = Path(folder) / target.name
            command = [compiler, *FLAGS, "-o", str(built), str(SOURCE)]
            subprocess.run(command, check=True, capture_output=True, text=True)
            os.replace(built, target)
    return target


def _cpu() -> str:
    """The CPU's identity for the cache key (``-march=native`` code runs only where it was built)."""
    return " ".join(sorted(cpu_flags())) + platform.machine() + platform.processor()
