"""One decoding for the library, the index and a bundle (issue 28, item 1): awkward image files
(EXIF-rotated JPEG, RGBA and LA with alpha, 16-bit PNG, CMYK JPEG, palette PNG with a
transparent colour, grayscale) embed the same through ``gspdml index`` and through a bundle
loaded by a new Python process in another folder, with the run gone; the bundle and the ONNX
sidecar state the decoding rules of :func:`gspdml.data.images.load_image`."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from gspdml.data.images import DECODING, load_image
from gspdml.retrieval.bundle import write_bundle
from gspdml.retrieval.index import RetrievalIndex
from tests.helpers.retrieval import run_cli, write_run

ROOT = Path(__file__).resolve().parents[2]


def awkward_folder(folder: Path) -> list[Path]:
    """One file per decoding rule, each with a pattern whose decoding matters (a bare
    ``Image.open(...).convert("RGB")`` decodes every one of them differently)."""
    folder.mkdir(parents=True)
    rows, cols = np.mgrid[0:40, 0:56]
    rgb = np.stack([rows * 6, cols * 4, np.where(cols < 20, 230, 20)], -1).astype(np.uint8)
    alpha = np.where((cols // 8) % 2 == 0, 0, 255).astype(np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: rotate 90 degrees clockwise to display
    Image.fromarray(rgb).save(folder / "exif_rotated.jpg", exif=exif, quality=95)
    Image.fromarray(np.dstack([rgb // 3, alpha]), "RGBA").save(folder / "rgba.png")
    grey = (rows * 5 + cols * 2).astype(np.uint8)
    Image.fromarray(np.dstack([grey // 4, alpha]), "LA").save(folder / "la.png")
    Image.fromarray((rows * 1500 + cols * 30).astype(np.uint16)).save(folder / "deep16.png")
    Image.fromarray(rgb).convert("CMYK").save(folder / "cmyk.jpg", quality=95)
    palette = Image.fromarray(rgb // 2).quantize(colors=8)
    transparent = int(np.asarray(palette)[0, 0])
    palette.save(folder / "palette.png", transparency=transparent)
    Image.fromarray(grey).save(folder / "grey.png")
    files = sorted(folder.iterdir())
    assert {Image.open(f).mode for f in files} == {"RGB", "RGBA", "LA", "I;16", "CMYK", "P", "L"}
    return files


BUNDLE_SCRIPT = """
import sys, torch
import gspdml
encoder = gspdml.from_pretrained(sys.argv[1])
torch.save(encoder(sys.argv[3:], batch_size=3), sys.argv[2])
"""


def test_index_and_a_bundle_in_a_new_process_embed_every_awkward_file_alike(tmp_path, capsys):
    files = awkward_folder(tmp_path / "images" / "all")
    write_run(tmp_path / "run", pooling="gsp", seed=5)
    assert run_cli("index", tmp_path / "run", tmp_path / "images", "--out", tmp_path / "idx") == 0
    index = RetrievalIndex.load(tmp_path / "idx")
    assert index.paths == [str(f.resolve()) for f in files]
    write_bundle(tmp_path / "run", tmp_path / "bundle")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(tmp_path / "bundle", elsewhere / "bundle")
    shutil.rmtree(tmp_path / "run")  # the bundle is self-contained
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    out = elsewhere / "vectors.pt"
    command = [sys.executable, "-c", BUNDLE_SCRIPT, "bundle", out, *map(str, files)]
    subprocess.run(command, cwd=elsewhere, env=env, check=True, timeout=120)
    bundled = torch.load(out)
    cosine = torch.nn.functional.cosine_similarity(bundled, index.vectors)
    assert (cosine >= 0.9999).all(), dict(zip([f.name for f in files], cosine.tolist()))
    # the rules the bundle states are those of the one loader, which rotates, flattens, widens
    stated = json.loads((elsewhere / "bundle" / "preprocessing.json").read_text())["decoding"]
    assert stated == DECODING
    assert load_image(files[2]).size == (40, 56)  # exif_rotated.jpg: 56 x 40 stored sideways


def test_the_onnx_sidecar_states_the_same_decoding(tmp_path, capsys):
    write_run(tmp_path / "run")
    out = tmp_path / "embedder.onnx"
    assert run_cli("export", tmp_path / "run", "--format", "onnx", "--out", out) == 0
    sidecar = json.loads(out.with_name("embedder.onnx.json").read_text())
    assert sidecar["decoding"] == DECODING and sidecar["transform"]["resize"] == [32]
