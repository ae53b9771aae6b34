"""PASCAL VOC 2007 and 2012 images with their object boxes, in the official layout
(``VOCtrainval_06-Nov-2007.tar``, ``VOCtrainval_11-May-2012.tar``), as LOST's object-discovery
evaluation reads them (Siméoni et al., BMVC 2021, §4: the ``trainval`` set, every annotated
object, difficult and truncated ones included)::

    <root>/[VOCdevkit/]VOC<year>/ImageSets/Main/<set>.txt   one image id a line
    <root>/[VOCdevkit/]VOC<year>/Annotations/<id>.xml       <object><bndbox><xmin>..</bndbox>
    <root>/[VOCdevkit/]VOC<year>/JPEGImages/<id>.jpg

VOC's corners are 1-based pixel indices, both included; a box ``xmin ymin xmax ymax`` is
``(xmin - 1, ymin - 1, xmax, ymax)`` in continuous coordinates (LOST's conversion). The XML is
read safely (:func:`gspdml.data.boxed_images.parse_xml`).
"""

from __future__ import annotations

from gspdml.data.boxed_images import BoxedImage, xml_boxes
from gspdml.data.textfiles import find_dir, read_text
from gspdml.errors import DataError

#: the years of the release
YEARS = ("2007", "2012")


def read_voc_boxes(root: str, year: str, image_set: str = "trainval") -> list[BoxedImage]:
    """The images of ``ImageSets/Main/<image_set>.txt`` of VOC ``year`` with the boxes of every
    object of their annotation, in the list's order (module doc)."""
    if year not in YEARS:
        raise DataError(f"VOC year {year!r}: expected one of {list(YEARS)}")
    source = f"VOC{year}"
    base = find_dir(root, "Annotations", [source, f"VOCdevkit/{source}", "."], source)
    listing = base / "ImageSets" / "Main" / f"{image_set}.txt"
    if not listing.is_file():
        raise DataError(f"{source}: missing file {listing}")
    out = []
    for name in read_text(listing).split():
        path = base / "Annotations" / f"{name}.xml"
        if not path.is_file():
            raise DataError(f"{listing}: image {name} has no annotation {path}")
        out.append(BoxedImage(base / "JPEGImages" / f"{name}.jpg", xml_boxes(path, shift=1)))
    return out
