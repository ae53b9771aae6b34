"""Pictures for the HTML report: PNG data URIs, pooling-weight heatmaps and training curves."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from gspdml.errors import ConfigError


def _matplotlib() -> tuple[Any, Any]:  # (Figure, colormaps) of the optional matplotlib
    try:
        import matplotlib  # noqa: F401
        from matplotlib import colormaps
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(
            "report", "the report draws with matplotlib: pip install 'gspdml[plots]'"
        ) from None
    return Figure, colormaps


def figure_svg(figure: Any) -> str:
    """A matplotlib figure as inline ``<svg>`` markup (the XML header cut)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def png_data_uri(image: np.ndarray, max_side: int = 160) -> str:
    """``data:image/png;base64,...`` of an image ``[H, W, 3]`` or ``[H, W, 1]`` with values in
    [0, 1], shrunk (never enlarged) so that its longer side is at most ``max_side`` pixels."""
    pixels = (np.clip(image, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    if pixels.shape[-1] == 1:
        pixels = pixels[..., 0]
    picture = Image.fromarray(pixels)
    if max(picture.size) > max_side:
        scale = max_side / max(picture.size)
        size = (max(1, round(picture.width * scale)), max(1, round(picture.height * scale)))
        picture = picture.resize(size, Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def upsample_weights(weights: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
    """Pooling weights ``[h, w]`` bilinearly resized to the image ``size`` and scaled so that
    the largest is 1 (weights are relative: a uniform map, GAP's, shows as uniform)."""
    if weights.dim() != 2:
        raise ValueError(f"expected spatial weights [h, w], got shape {tuple(weights.shape)}")
    grid = F.interpolate(
        weights.detach().float().cpu()[None, None], size=size, mode="bilinear", align_corners=False
    )[0, 0]
    grid = grid.clamp_min(0)
    return (grid / grid.max().clamp_min(1e-12)).numpy()


def heatmap_overlay(image: np.ndarray, weights: torch.Tensor, alpha: float = 0.55) -> np.ndarray:
    """The image ``[H, W, C]`` (in [0, 1]) blended with the 'jet' colouring of its upsampled weights."""
    _, colormaps = _matplotlib()
    heat = colormaps["jet"](upsample_weights(weights, image.shape[:2]))[..., :3]
    rgb = np.repeat(image, 3, axis=2) if image.shape[2] == 1 else image
    overlay: np.ndarray = (1.0 - alpha) * rgb + alpha * heat
    return overlay


def colour_bar_html(width: int = 160, height: int = 12) -> str:
    """The 'jet' colour bar of :func:`heatmap_overlay` with its scale (weight / largest weight,
    0 to 1), as an inline PNG with tick labels."""
    _, colormaps = _matplotlib()
    ramp = colormaps["jet"](np.linspace(0.0, 1.0, width))[None, :, :3].repeat(height, axis=0)
    ticks = "".join(
        f'<span style="position:absolute;left:{round(f * width) - 8}px;width:16px;text-align:center">{f:g}</span>'
        for f in (0.0, 0.25, 0.5, 0.75, 1.0)
    )
    return (
        f'<div class="colourbar" title="pooling weight / largest weight of the image">'
        f'<img src="{png_data_uri(ramp, max_side=width)}" alt="colour bar: weight / largest weight, 0 to 1" '
        f'width="{width}" height="{height}">'
        f'<div style="position:relative;width:{width}px;height:14px;font-size:10px">{ticks}</div></div>'
    )


#: the metric panels of :func:`training_curves_svg`: (title, [(split, metric), ...])
_RETRIEVAL = tuple(
    (split, metric) for split in ("val", "test") for metric in ("map_at_r", "precision_at_1")
)
PANELS = (("loss", (("train", "loss"),)), ("retrieval", _RETRIEVAL))


def curve_series(
    rows: Sequence[dict[str, Any]], selected_step: Optional[int] = None
) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """``{(split, metric): [(step, value), ...]}`` of the records of ``metrics.jsonl`` (sorted by
    step) for the keys of :data:`PANELS`; the test values at ``selected_step`` when given (the
    step its weights come from, not the one at which training stopped)."""
    series = {}
    for _, keys in PANELS:
        for split, metric in keys:
            points = [
                (
                    selected_step if split == "test" and selected_step is not None else r["step"],
                    r[metric],
                )
                for r in rows
                if r.get("split") == split and isinstance(r.get(metric), (int, float))
            ]
            if points:
                series[(split, metric)] = sorted(points)
    return series


def training_curves_svg(rows: Sequence[dict[str, Any]], selected_step: Optional[int] = None) -> str:
    """Inline SVG: training loss and validation/test MAP@R (and P@1) of the records of
    ``metrics.jsonl`` against the step (:func:`curve_series`), with a dotted vertical line at
    ``selected_step`` (the step of the weights); empty when nothing is plottable."""
    Figure, _ = _matplotlib()
    series = curve_series(rows, selected_step)
    if not series:
        return ""
    used = [(title, [key for key in keys if key in series]) for title, keys in PANELS]
    used = [(title, keys) for title, keys in used if keys]
    figure = Figure(figsize=(4.6 * len(used), 3.2))
    for i, (title, keys) in enumerate(used):
        axes = figure.add_subplot(1, len(used), i + 1)
        for split, metric in keys:
            steps, values = zip(*series[(split, metric)])
            axes.plot(
                steps,
                values,
                marker="o" if len(steps) < 30 or split == "test" else None,
                markersize=6 if split == "test" else 3,
                linestyle="none" if split == "test" else "-",
                label=f"{split} {metric}",
            )
        if title == "retrieval" and selected_step is not None:
            label = f"weights: step {selected_step}"
            axes.axvline(selected_step, color="#5b6570", linestyle=":", label=label)
        axes.set_xlabel("step")
        axes.set_title("training loss" if title == "loss" else "retrieval metrics")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.tight_layout()
    return figure_svg(figure)
