"""``RUN_DIR/environment.json``: what a run's numbers depend on beyond its config and data.

- ``plugins``: the plugin modules the run depends on, those its config names and those whose
  components it uses (:mod:`gspdml.training.run_plugins`), imported again when the run is read
  back.
- ``threads``: torch's and OpenMP/MKL/OpenBLAS thread counts (CPU kernels split reductions by
  thread, so another count can give other weights; :func:`determinism_note`).
- ``cpu``, ``device``, ``precision``: the CPU model and ATen's instruction set, the device, and
  the precision the trainer resolved.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import torch

from gspdml.compat.hardware import aten_capability, cpu_model
from gspdml.errors import read_json_object
from gspdml.output_files import atomic_write_text, json_text

ENVIRONMENT_FILE = "environment.json"
#: the environment variables that set the thread counts of the BLAS and OpenMP runtimes
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_record() -> dict[str, Any]:
    """torch's thread counts and the thread variables (None: unset)."""
    return {
        "torch_intra_op": torch.get_num_threads(),
        "torch_inter_op": torch.get_num_interop_threads(),
        **{name: os.environ.get(name) for name in THREAD_VARIABLES},
    }


def environment_record(
    device: torch.device | str, precision: str, plugins: list[dict[str, Any]]
) -> dict[str, Any]:
    """The record of this process (module doc); ``plugins``: the run's plugin modules."""
    return {
        "plugins": plugins,
        "threads": thread_record(),
        "cpu": {"model": cpu_model(), "capability": aten_capability()},
        "device": str(device),
        "precision": precision,
        "torch": torch.__version__,
    }


def write_environment(run_dir: Path, record: Mapping[str, Any], resume: bool = False) -> None:
    """Write the record; a resumed run keeps its start's record and appends this one to
    ``resumes``."""
    saved = read_environment(run_dir) if resume else None
    if saved is not None:
        record = {**saved, "resumes": [*saved.get("resumes", []), dict(record)]}
    atomic_write_text(Path(run_dir) / ENVIRONMENT_FILE, json_text(record, indent=1) + "\n")


def read_environment(run_dir: Path | str) -> Optional[dict[str, Any]]:
    """The run's record, None for a run written before it existed."""
    path = Path(run_dir) / ENVIRONMENT_FILE
    return read_json_object(path) if path.is_file() else None


def determinism_note(record: Optional[Mapping[str, Any]]) -> str:
    """One sentence for a report: the thread count, CPU and precision the run trained with."""
    if record is None:
        return "The run did not record its thread counts (trained before gspdml recorded them)."
    threads, cpu = record.get("threads", {}), record.get("cpu", {})
    return (
        f"Trained with {threads.get('torch_intra_op')} torch threads "
        f"(OMP_NUM_THREADS={threads.get('OMP_NUM_THREADS')}) on {cpu.get('model')} "
        f"({cpu.get('capability')}), device {record.get('device')}, precision "
        f"{record.get('precision')}. CPU kernels split their sums by thread, so training again "
        "with another thread count, CPU or precision may give other weights and metrics."
    )
