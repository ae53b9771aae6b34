"""Import torchvision on a CPU build of torch when PyPI's torchvision is a CUDA build.

PyPI's ``torchvision==0.28.0`` (matched to torch 2.13) ships a CUDA ``_C`` extension that a CPU
build of torch cannot load, and ``import torchvision`` then fails with ``RuntimeError: operator
torchvision::nms does not exist``: ``_meta_registrations`` registers fake kernels for
``torchvision::nms`` and ``qnms`` unconditionally, which need the operator *schemas* the
extension would have defined (measured on the project's CPU build machines).

:func:`import_torchvision` defines those two schemas with ``torch.library.Library("torchvision",
"DEF")`` before the import, only on a CPU build whose extension fails to load. Models and
transforms (and so timm) then work; ``torchvision.ops`` kernels and ``torchvision.io`` stay
unavailable. The module-level ``Library`` object keeps the definitions alive.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Optional

import torch

# Schemas of the two operators torchvision's fake-kernel registrations require
# (torchvision/csrc/ops/nms.cpp; qnms is its quantized twin with the same signature).
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)

_LIBRARY: Optional[torch.library.Library] = None  # keeps the schema definitions alive


def torch_is_cpu_build() -> bool:
    """True when this torch was built without CUDA and without ROCm."""
    return torch.version.cuda is None and getattr(torch.version, "hip", None) is None


def _extension_path(spec: importlib.machinery.ModuleSpec) -> Optional[str]:
    """Path of torchvision's ``_C`` extension, found without importing torchvision."""
    for directory in spec.submodule_search_locations or ():
        finder = importlib.machinery.FileFinder(
            directory,
            (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
        )
        found = finder.find_spec("_C")
        if found is not None and found.origin:
            return found.origin
    return None


def _extension_loads(spec: importlib.machinery.ModuleSpec) -> bool:
    path = _extension_path(spec)
    if path is None:
        return False
    try:
        torch.ops.load_library(path)
    except (OSError, RuntimeError):
        return False
    return True


def _has_nms_schema() -> bool:
    try:
        torch.ops.torchvision.nms  # noqa: B018  (attribute lookup resolves the operator)
    except (AttributeError, RuntimeError):
        return False
    return True


def define_missing_schemas() -> bool:
    """Define ``torchvision::nms``/``qnms`` if needed; returns True when the shim is active.

    Does nothing (returns False) when torchvision is not installed, when torch is a CUDA/ROCm
    build (its extension is expected to load; a real failure should stay visible), or when the
    extension loads or the schemas already exist.
    """
    global _LIBRARY
    if _LIBRARY is not None:
        return True
    try:
        spec = importlib.util.find_spec("torchvision")
    except (ImportError, ValueError):  # a finder that refuses it: as good as not installed
        return False
    if spec is None or not torch_is_cpu_build():
        return False
    if "torchvision" in sys.modules or _has_nms_schema() or _extension_loads(spec):
        return False
    library = torch.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        library.define(schema)
    _LIBRARY = library
    return True


def import_torchvision() -> ModuleType:
    """``import torchvision``, applying the CPU-build workaround first when it is needed.

    Raises ``ImportError`` (from the import itself) when torchvision is not installed."""
    if "torchvision" not in sys.modules:
        define_missing_schemas()
    return importlib.import_module("torchvision")
