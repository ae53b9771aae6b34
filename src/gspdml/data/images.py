"""Robust image decoding: every file becomes an RGB ``PIL.Image`` or a :class:`DataError` that
names it (a missing, truncated or undecodable file, a NaN or infinite pixel, a path that is not a
regular file), by the rules of :data:`DECODING`, which an exported model records beside it.

Search, indexes, exports and bundles decode with :func:`load_image` as the datasets do (a PIL
image given instead of a file gets :func:`decode_image`, the same rules).
"""

from __future__ import annotations

import math
import os
import stat
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from gspdml.data.transforms import Resize
from gspdml.errors import DataError

#: the decoding rules, as recorded beside exported models (ONNX/TorchScript sidecar, bundle)
DECODING = {
    "loader": "gspdml.data.images.load_image",
    "exif_orientation": "applied (ImageOps.exif_transpose)",
    "colour": "converted to RGB (palette, grey, 1-bit, CMYK, YCbCr, LAB)",
    "transparency": "composited on white (RGBA, LA, palette with a transparent colour)",
    "wide_grey": "16-bit grey divided by 65535 (by 255 when no value exceeds 255), float grey "
    "in [0, 1] (else by its maximum), to 8 bits",
    "non_finite": "an image with a NaN or infinite pixel is refused (an error naming the file)",
}
IMAGE_EXTENSIONS = (
    ".jpg",
    ".jpeg",
    ".png",
    ".bmp",
    ".gif",
    ".tif",
    ".tiff",
    ".webp",
    ".ppm",
    ".pgm",
)
#: folders that archivers and tools add beside the data (never classes, never images)
SYSTEM_FOLDERS = ("__MACOSX",)


def is_hidden(name: str) -> bool:
    """Dot-files and dot-folders (``.ipynb_checkpoints``, ``._photo.jpg`` of macOS) and
    :data:`SYSTEM_FOLDERS`: skipped when a folder of images is read."""
    return name.startswith(".") or name in SYSTEM_FOLDERS


def list_images(folder: str | os.PathLike[str]) -> tuple[list[Path], list[Path]]:
    """``(images, skipped)`` under ``folder``: the image files (by extension, recursive, sorted),
    and what was not read: hidden or system folders and hidden image files (:func:`is_hidden`),
    image-named entries that are not regular files (pipes, sockets, devices: reading one would
    block or never end), and a linked folder seen before or above ``folder`` (a link cycle, a
    second link to one folder). Symbolic links to folders are followed, as the training reader follows a linked
    class folder, so every command sees the same files."""
    images: list[Path] = []
    skipped: list[Path] = []
    top = os.path.realpath(folder)
    seen = {top}
    for here, folders, files in os.walk(os.fspath(folder), followlinks=True):
        base = Path(here)
        entered = []
        for name in sorted(folders):
            real = os.path.realpath(base / name)
            if is_hidden(name) or real in seen or top.startswith(real + os.sep):
                skipped.append(base / name)
            else:
                seen.add(real)
                entered.append(name)
        folders[:] = entered
        for name in files:
            if name.lower().endswith(IMAGE_EXTENSIONS):
                regular = os.path.isfile(base / name)  # follows a link to a file
                (skipped if is_hidden(name) or not regular else images).append(base / name)
    return sorted(images), sorted(skipped)


def _wide_to_8bit(image: Image.Image) -> Image.Image:
    """Rescale 16-bit or float grayscale to ``L``: integers by their bit depth, floats in [0, 1]
    (or their own range when they exceed it)."""
    values = np.asarray(image, dtype=np.float64)
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if bad:  # NaN/inf has no grey level; decoding it as black would hide a broken file
        raise ValueError(f"{bad} of {values.size} pixels are not finite (NaN or infinity)")
    if image.mode == "F":
        top = 1.0 if values.max(initial=0.0) <= 1.0 else values.max()
    else:
        top = 65535.0 if values.max(initial=0) > 255 else 255.0
    return Image.fromarray(np.clip(np.round(values / top * 255.0), 0, 255).astype(np.uint8), "L")


def to_rgb(image: Image.Image) -> Image.Image:
    """Convert a decoded image of any mode to RGB (see the module docstring)."""
    if image.mode == "RGB":
        return image
    if image.mode.startswith("I") or image.mode == "F":
        return _wide_to_8bit(image).convert("RGB")
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def decode_image(image: Image.Image) -> Image.Image:
    """An opened image as :func:`load_image` returns its file: EXIF orientation applied, then
    :func:`to_rgb`; ``image`` itself is left as it is."""
    return to_rgb(ImageOps.exif_transpose(image))


def _decode_opened(image: Image.Image) -> Image.Image:
    """:func:`decode_image` of an image :func:`load_image` opened itself: oriented in place, so
    an image without an EXIF rotation is not copied."""
    ImageOps.exif_transpose(image, in_place=True)
    return to_rgb(image)


#: what decoding a corrupt, truncated, foreign or oversized image file raises
_UNREADABLE = (
    UnidentifiedImageError,
    OSError,
    SyntaxError,
    ValueError,
    Image.DecompressionBombWarning,
    Image.DecompressionBombError,
)


def load_image(path: str | os.PathLike[str], shorter_side: int | None = None) -> Image.Image:
    """Decode ``path`` into an RGB image, applying its EXIF orientation. A path that is not
    a regular file (a named pipe called ``x.png``) is refused before it is opened.

    ``shorter_side``: the transform's first step resizes the shorter side to it (the recipes'
    ``Resize(256)``). A JPEG at least twice that size is then decoded at reduced size (libjpeg's
    DCT scaling, PIL's ``draft``, never below ``shorter_side``) and resized at once to the size
    that step would give, so the step leaves it as it is: several times less decoding for large
    photos, pixels close to the full decode's (tests/data/test_data_reduced_decode.py bounds the
    difference). Recipes that crop the original first (``proxynca``, ``libc``) decode fully."""
    _check_regular(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                if shorter_side is not None and image.format == "JPEG":
                    return _reduced_decode(image, shorter_side)
                image.load()
                return _decode_opened(image)
    except FileNotFoundError:
        raise DataError(f"{path}: image file not found") from None
    except _UNREADABLE as error:
        raise DataError(f"{path}: cannot decode image ({type(error).__name__}: {error})") from None


def _reduced_decode(image: Image.Image, shorter_side: int) -> Image.Image:
    """:func:`load_image` of an open JPEG for a first step that resizes the shorter side to
    ``shorter_side``. libjpeg scales by ``1/s`` (s = 1, 2, 4, 8) to ``ceil(size / s)`` pixels,
    the last row and column covering a partial block; the decoded image is resized from the
    exact region ``size / s`` (a fractional box, so no shift) to the size the step would give
    the full image, before the EXIF orientation is applied (the step's size is symmetric)."""
    full = image.size
    scale = shorter_side / min(full)
    image.draft(image.mode, (math.ceil(full[0] * scale), math.ceil(full[1] * scale)))
    image.load()
    if image.size == full:
        return _decode_opened(image)
    s = next(s for s in (2, 4, 8) if image.size == (-(-full[0] // s), -(-full[1] // s)))
    box = (0.0, 0.0, full[0] / s, full[1] / s)
    size = Resize(shorter_side).output_size(*full)
    resized = image.resize(size, Image.Resampling.BILINEAR, box=box)
    resized.info = dict(image.info)  # the EXIF orientation, for decode_image
    return _decode_opened(resized)


def _check_regular(path: str | os.PathLike[str]) -> None:
    if not isinstance(path, (str, os.PathLike)):
        return  # an open file object: already readable
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DataError(f"{path}: image file not found") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read ({error.strerror})") from None
    if not stat.S_ISREG(mode):
        raise DataError(f"{path}: not a regular file (a pipe, socket or device is never read)")


def check_image(path: str | os.PathLike[str]) -> str | None:
    """A cheap check (the file exists and its header is a known image format); returns the
    problem as text, or None when the file looks fine. Decoding errors beyond the header are
    only found by :func:`load_image`."""
    try:
        _check_regular(path)
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                image.size  # noqa: B018 (the header is parsed by open)
    except DataError as error:
        return str(error).removeprefix(f"{path}: ")
    except _UNREADABLE as error:
        return f"{type(error).__name__}: {error}"
    return None
