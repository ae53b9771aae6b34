"""Images with ground-truth boxes, the input of the localisation and object-discovery
evaluations (:mod:`gspdml.evaluation.localisation`), and the safe reading of the XML
annotation files their official releases use (PASCAL VOC, ImageNet CLS-LOC).

A box is ``(x0, y0, x1, y1)`` in the pixels of the original image, as the release states it
(each reader's docstring says how it converts).
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gspdml.errors import DataError


class BoxedImage(NamedTuple):
    """One image file and its ground-truth boxes ``[n, 4]`` (float, ``x0, y0, x1, y1``)."""

    path: Path
    boxes: np.ndarray


def boxes_array(rows: list[tuple[float, float, float, float]], source: str) -> np.ndarray:
    """``rows`` as a ``[n, 4]`` float array, each box checked: ``x0 <= x1`` and ``y0 <= y1``;
    a DataError naming ``source`` otherwise."""
    array = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    bad = (array[:, 2] < array[:, 0]) | (array[:, 3] < array[:, 1])
    if bad.any():
        raise DataError(
            f"{source}: box {array[bad][0].tolist()} has x1 < x0 or y1 < y0; a box is "
            "(x0, y0, x1, y1) with the corner (x0, y0) top left"
        )
    return array


def parse_xml(path: Path) -> ElementTree.Element:
    """The root element of the XML file ``path``, read without expanding entities: a file with
    a document type declaration (``<!DOCTYPE``, where entities are declared) is refused, as the
    official annotation files have none (defusedxml's rule, applied with the standard
    library's parser)."""
    data = path.read_bytes()
    if b"<!DOCTYPE" in data.upper() or b"<!ENTITY" in data.upper():
        raise DataError(
            f"{path}: an XML annotation with a document type declaration (<!DOCTYPE or "
            "<!ENTITY) is refused (entities could expand without bound); the official files "
            "have none: restore the file from the release"
        )
    try:
        return ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        raise DataError(f"{path}: malformed XML ({error}); restore it from the release") from None


def xml_number(element: ElementTree.Element, tag: str, path: Path) -> float:
    """The number in the child ``tag`` of ``element``; a DataError naming the file and the
    field otherwise."""
    text = element.findtext(tag)
    try:
        return float(text if text is not None else "")
    except ValueError:
        raise DataError(f"{path}: field {tag} is {text!r}, expected a number") from None


def xml_boxes(path: Path, shift: float = 0.0) -> np.ndarray:
    """The ``<bndbox>`` of every ``<object>`` of the annotation ``path`` (PASCAL VOC's format,
    which ImageNet's CLS-LOC annotations share) as ``(xmin - shift, ymin - shift, xmax, ymax)``
    rows; a DataError when an object has no box or the file none."""
    rows = []
    for obj in parse_xml(path).iter("object"):
        box = obj.find("bndbox")
        if box is None:
            raise DataError(f"{path}: an <object> without <bndbox>")
        xmin, ymin, xmax, ymax = (
            xml_number(box, t, path) for t in ("xmin", "ymin", "xmax", "ymax")
        )
        rows.append((xmin - shift, ymin - shift, xmax, ymax))
    if not rows:
        raise DataError(f"{path}: no <object>; every image of the set has one")
    return boxes_array(rows, str(path))
