"""Fixtures shared by the data tests: tiny image files written on the fly."""

import pytest

from tests.helpers.datasets import write_image as _write_image


@pytest.fixture
def write_image():
    return _write_image
