"""Real faults for the robustness tests: a file-size limit (a full disk as the writer sees it),
in this process or in a child, and a child Python process that kills itself with SIGKILL at a
chosen point.

``RLIMIT_FSIZE`` makes every write past the limit fail with ``EFBIG`` (SIGXFSZ is ignored, so the
write returns the error instead of killing the process); it works as root, where a read-only
folder does not stop a writer. In this process only the soft limit is lowered, and restored
after the block (a child interpreter costs seconds of imports on a busy machine).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def file_size_limit(limit: int):
    """Writes past ``limit`` bytes of any file fail with EFBIG inside the block."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with this checkout's ``src`` and ``tests`` importable."""

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


#: child code that kills its own process (SIGKILL) right after ``module.save_file`` has written
#: its file: a kill in the middle of a multi-file save
KILL_AFTER_SAVE_FILE = """
import os, signal
def kill_after(module):
    real = module.save_file
    def save_then_die(*args, **kwargs):
        real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    module.save_file = save_then_die
"""
