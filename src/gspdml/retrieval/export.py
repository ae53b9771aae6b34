"""Export a run's embedder to TorchScript or ONNX, and prove the export computes the same thing.

The exported graph maps images ``[B, C, H, W]`` (transformed as at evaluation,
:mod:`gspdml.retrieval.preprocessing`) to the embedding ``[B, D]``, for any batch size. Poolings
with a fixed number of iterations (GSP's fixed-point loop) are unrolled by tracing, without
gradients: a pooling with a custom autograd function must then take a plain-ops forward path.
Every export is checked on seeded random inputs of another batch size: the largest absolute
difference from the PyTorch model must not exceed ``tolerance`` (default 1e-5, fp32). A sidecar
``<file>.json`` records the input shape, how an image file becomes that input (``decoding``,
then ``transform``) and the measured difference. Both files are replaced atomically, so a failed
export leaves the previous one as it was, and the next export removes the temporaries a killed one
left beside them (:func:`gspdml.output_files.remove_killed_temporaries`).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import torch
from torch import nn

from gspdml.data.images import DECODING
from gspdml.errors import ConfigError, GspdmlError, import_optional
from gspdml.models import Embedder
from gspdml.output_files import (
    atomic_write_bytes,
    atomic_write_text,
    check_writable_file,
    json_text,
    refuse_linked_folders,
    remove_killed_temporaries,
)
from gspdml.retrieval.build import model_info
from gspdml.retrieval.encoder import image_channels, load_model_and_transform
from gspdml.retrieval.preprocessing import ImageTransform

FORMATS = {"torchscript": ".pt", "onnx": ".onnx"}
#: the run's sub-folder an export goes to without ``out``
EXPORT_DIR = "export"
TOLERANCE = 1e-5


class ExportError(GspdmlError):
    """The exporter could not convert the embedder (the message names the format and the cause)."""


class ExportMismatchError(ExportError):
    """The exported model's embeddings differ from the PyTorch model's beyond the tolerance."""


class EmbeddingOnly(nn.Module):
    """The embedder with a plain tensor output (``EmbedderOutput.embedding``), as exporters need."""

    def __init__(self, embedder: nn.Module):
        super().__init__()
        self.embedder = embedder

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        embedding: torch.Tensor = self.embedder(images).embedding
        return embedding


def sidecar_path(path: Path) -> Path:
    """The JSON file beside an exported model (``embedder.pt.json``)."""
    return path.with_name(path.name + ".json")


def sample_images(channels: int, size: tuple[int, int], batch: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, channels, *size, generator=torch.Generator().manual_seed(seed))


def _onnx_modules() -> ModuleType:
    import_optional(
        "onnx",
        "--format",
        "ONNX export needs the 'onnx' package: pip install 'gspdml[onnx]' (onnx, onnxruntime)",
    )
    return import_optional(
        "onnxruntime",
        "--format",
        "checking the ONNX export needs 'onnxruntime': pip install 'gspdml[onnx]' (or pass --no-check)",
    )


def export_torchscript(
    module: nn.Module, example: torch.Tensor
) -> tuple[bytes, Callable[[torch.Tensor], torch.Tensor]]:
    """Trace and serialise: the file's bytes and the *reloaded* module, as a user loads it."""
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", category=DeprecationWarning)
        traced = torch.jit.trace(module, example, check_trace=False)
        torch.jit.save(traced, buffer)
        data = buffer.getvalue()
        loaded = torch.jit.load(io.BytesIO(data), map_location="cpu")
    return data, lambda images: loaded(images)


def export_onnx(
    module: nn.Module, example: torch.Tensor, check: bool = True
) -> tuple[bytes, Optional[Callable[[torch.Tensor], torch.Tensor]]]:
    """Export with the TorchScript-based exporter (opset 17, dynamic batch); return the file's
    bytes and, when ``check``, an onnxruntime session of them as a function."""
    onnxruntime = _onnx_modules() if check else None
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", category=DeprecationWarning)
        torch.onnx.export(
            module,
            (example,),
            buffer,  # type: ignore[arg-type]  # the TorchScript exporter writes to a file object
            input_names=["images"],
            output_names=["embedding"],
            dynamic_axes={"images": {0: "batch"}, "embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    data = buffer.getvalue()
    if onnxruntime is None:
        return data, None
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    return data, lambda images: torch.from_numpy(
        session.run(["embedding"], {"images": images.numpy()})[0]
    )


def max_difference(
    module: nn.Module, exported: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor
) -> float:
    with torch.inference_mode():
        expected, actual = module(inputs).float(), exported(inputs).float()
    if actual.shape != expected.shape:
        raise ExportMismatchError(
            f"exported model returns shape {tuple(actual.shape)}, PyTorch {tuple(expected.shape)}"
        )
    return float((actual - expected).abs().max())


def export_embedder(
    model: Embedder,
    fmt: str,
    path: str | Path,
    channels: int,
    size: tuple[int, int],
    transform: Optional[ImageTransform] = None,
    info: Optional[dict[str, Any]] = None,
    check: bool = True,
    tolerance: float = TOLERANCE,
    seed: int = 0,
) -> dict[str, Any]:
    """Write ``path`` (and ``path.json``); returns the sidecar record.

    Raises :class:`ExportMismatchError` when the check fails (the files are left for inspection).
    """
    if fmt not in FORMATS:
        raise ConfigError("--format", f"unknown format {fmt!r}; allowed: {', '.join(FORMATS)}")
    path = Path(path)
    module = EmbeddingOnly(model.cpu().eval()).eval()
    example = sample_images(channels, size, 2, seed)
    exported: Optional[Callable[[torch.Tensor], torch.Tensor]]
    try:
        if fmt == "torchscript":
            data, exported = export_torchscript(module, example)
        else:
            data, exported = export_onnx(module, example, check)
    except RuntimeError as err:
        cause = str(err).strip().splitlines()
        raise ExportError(
            f"{fmt} export of the embedder failed: {cause[0] if cause else type(err).__name__}"
            + (
                " (a Python autograd function in the forward pass cannot be saved; it needs a plain-ops path without gradients)"
                if "Python function" in str(err)
                else ""
            )
        ) from None
    shape = ["batch", channels, size[0], size[1]]
    record: dict[str, Any] = {
        "format": fmt,
        "file": path.name,
        "input": {"name": "images", "shape": shape, "dtype": "float32"},
        "output": {"name": "embedding", "shape": ["batch", int(model.embedding_dim)]},
        "decoding": DECODING,
        "transform": transform.describe() if transform is not None else None,
        "run": info,
        "check": None,
    }
    if check and exported is not None:  # export_onnx returns None only without the check
        inputs = sample_images(channels, size, 5, seed + 1)
        difference = max_difference(module, exported, inputs)
        record["check"] = {
            "inputs": "5 seeded N(0, 1) images",
            "max_abs_diff": difference,
            "tolerance": tolerance,
        }
    for written in (path, sidecar_path(path)):  # a killed export's, never a running one's
        remove_killed_temporaries(written)
    atomic_write_bytes(path, data)
    atomic_write_text(sidecar_path(path), json_text(record, indent=1))
    if check and not difference <= tolerance:  # NaN fails too
        raise ExportMismatchError(
            f"{path}: exported embeddings differ from PyTorch by {difference:.3g} > {tolerance:g}"
        )
    return record


def export_run(
    run_dir: str | Path,
    fmt: str,
    out: Optional[str | Path] = None,
    image_size: Optional[Sequence[int]] = None,
    check: bool = True,
    tolerance: float = TOLERANCE,
) -> tuple[Path, str]:
    """Export the embedder of the run in ``run_dir`` as ``fmt`` to ``out`` (default
    ``RUN_DIR/export/embedder.pt|.onnx``; a link in place of ``RUN_DIR/export`` is refused) for images of ``image_size`` (default: the run's eval
    transform's); returns the file and a line saying how close it is to PyTorch."""
    if not out:  # the run's own sub-folder: never written through a link out of the run
        refuse_linked_folders(run_dir, [EXPORT_DIR])
    path = Path(out) if out else Path(run_dir) / EXPORT_DIR / f"embedder{FORMATS[fmt]}"
    for written in (path, sidecar_path(path)):  # both, before the work: never one without the other
        check_writable_file(written)
    _, model, transform = load_model_and_transform(run_dir, torch.device("cpu"))
    size = (int(image_size[0]), int(image_size[1])) if image_size else transform.output_size
    if size is None:
        raise ConfigError(
            "--image-size",
            "the run's eval transform does not fix the image size; pass --image-size H W",
        )
    record = export_embedder(
        model,
        fmt,
        path,
        image_channels(model),
        size,
        transform,
        model_info(run_dir),
        check=check,
        tolerance=tolerance,
    )
    measured = record["check"]
    verdict = (
        f"max |difference| to PyTorch {measured['max_abs_diff']:.2e} <= {measured['tolerance']:g}"
        if measured
        else "not checked"
    )
    return path, f"wrote {path} ({fmt}, input {record['input']['shape']}); {verdict}"
