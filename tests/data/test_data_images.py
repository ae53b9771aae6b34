import io

import numpy as np
import pytest
from PIL import Image

from gspdml.data.images import check_image, load_image
from gspdml.errors import DataError


def test_grayscale_and_palette_become_rgb(tmp_path):
    gray = np.arange(48, dtype=np.uint8).reshape(6, 8) * 5
    Image.fromarray(gray, "L").save(tmp_path / "g.png")
    out = np.asarray(load_image(tmp_path / "g.png"))
    assert out.shape == (6, 8, 3) and (out == gray[:, :, None]).all()
    pal = Image.new("P", (4, 4))
    pal.putpalette([10, 20, 30, 200, 100, 50] + [0] * 762)
    pal.putpixel((1, 2), 1)
    pal.save(tmp_path / "p.gif")
    out = np.asarray(load_image(tmp_path / "p.gif"))
    assert tuple(out[0, 0]) == (10, 20, 30) and tuple(out[2, 1]) == (200, 100, 50)


def test_transparency_is_composited_on_white(tmp_path):
    rgba = np.zeros((2, 3, 4), dtype=np.uint8)
    rgba[0, 0] = (200, 0, 0, 255)  # opaque red
    rgba[0, 1] = (200, 0, 0, 0)  # fully transparent
    rgba[0, 2] = (0, 0, 0, 128)  # half-transparent black
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    out = np.asarray(load_image(tmp_path / "a.png")).astype(int)
    assert tuple(out[0, 0]) == (200, 0, 0) and tuple(out[0, 1]) == (255, 255, 255)
    expected = round(255 * (1 - 128 / 255))  # alpha blend of black over white
    assert np.abs(out[0, 2] - expected).max() <= 1
    pal = Image.new("P", (2, 1))
    pal.putpalette([0, 0, 0, 9, 9, 9] + [0] * 762)
    pal.putpixel((1, 0), 1)
    pal.info["transparency"] = 0
    pal.save(tmp_path / "t.png", transparency=0)
    out = np.asarray(load_image(tmp_path / "t.png"))
    assert tuple(out[0, 0]) == (255, 255, 255) and tuple(out[0, 1]) == (9, 9, 9)


def test_cmyk_jpeg(tmp_path):
    cmyk = Image.new("CMYK", (16, 16), (0, 0, 0, 0))
    cmyk.paste((255, 0, 0, 0), (0, 0, 8, 16))  # left half pure cyan
    cmyk.save(tmp_path / "c.jpg", quality=100)
    out = np.asarray(load_image(tmp_path / "c.jpg")).astype(int)
    assert out.shape == (16, 16, 3)
    assert np.abs(out[4, 12] - 255).max() <= 3  # no ink: white
    assert np.abs(out[4, 3] - np.array([0, 255, 255])).max() <= 3  # cyan = no red


def test_exif_orientation_is_applied(tmp_path):
    pixels = np.zeros((10, 20, 3), dtype=np.uint8)  # stored 20 wide, 10 high
    pixels[0, 0] = 255  # marker at the stored top-left
    image = Image.fromarray(pixels)
    exif = image.getexif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    image.save(tmp_path / "e.png", exif=exif.tobytes())
    out = np.asarray(load_image(tmp_path / "e.png"))
    # displayed 10 wide, 20 high; a clockwise turn moves the top-left corner to the top-right
    assert out.shape == (20, 10, 3)
    assert out[0, 9].min() == 255 and out[0, 0].max() == 0


def test_sixteen_bit_grayscale_is_rescaled(tmp_path):
    values = np.array([[0, 32896, 65535]], dtype=np.uint16)
    Image.fromarray(values).save(tmp_path / "w.png")
    assert Image.open(tmp_path / "w.png").mode.startswith("I")
    out = np.asarray(load_image(tmp_path / "w.png"))[0, :, 0]
    assert out.tolist() == [0, 128, 255]


def test_truncated_corrupt_and_missing_files_are_named(tmp_path, write_image):
    good = write_image(tmp_path / "ok.jpg", size=(64, 64), fmt="JPEG")
    data = open(good, "rb").read()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) // 2])
    (tmp_path / "junk.jpg").write_bytes(b"not an image at all" * 10)
    for name in ("cut.jpg", "junk.jpg", "gone.jpg"):
        with pytest.raises(DataError, match=str(tmp_path / name)):
            load_image(tmp_path / name)
    assert check_image(good) is None
    assert "not found" in check_image(tmp_path / "gone.jpg")
    assert check_image(tmp_path / "junk.jpg") is not None
    assert load_image(io.BytesIO(data)).size == (64, 64)
