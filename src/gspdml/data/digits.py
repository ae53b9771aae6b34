"""scikit-learn's digits as collage glyphs (the source of ``collage_digits``, the embedded
default dataset of :mod:`gspdml.data.collage`, and of ``collage_shared``).

scikit-learn ships ``load_digits`` (1,797 images of 8×8 pixels with values 0..16, 10 digits), so
these glyphs need no download.
"""

from __future__ import annotations

import numpy as np


def digit_glyphs() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as uint8 ``[1797, 8, 8]`` (values 0..16 scaled to 0..255) and labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    glyphs = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    return glyphs, digits.target.astype(np.int64)
