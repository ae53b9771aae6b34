"""Hardening item 13: a model that returns NaN embeddings is refused by ``gspdml index`` (exit
2, an error naming the images and the likely cause, no index written). Before, the index was
written with exit 0 and every later search blamed the query."""

import math

from safetensors import safe_open
from safetensors.torch import save_file

from gspdml.cli import main
from tests.helpers.retrieval import write_image_folder, write_run


def _damage_weights(path) -> None:
    """Set the first value of every floating-point tensor to NaN, keeping the metadata."""
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 (safe_open is not iterable)
    for tensor in tensors.values():
        if tensor.is_floating_point():
            tensor.view(-1)[0] = math.nan
    save_file(tensors, str(path), metadata=metadata)


def test_index_refuses_a_model_with_nan_embeddings(tmp_path, capsys):
    write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=2)
    write_run(tmp_path / "run")
    out = tmp_path / "idx"
    command = ["index", str(tmp_path / "run"), str(tmp_path / "images"), "--out", str(out)]
    assert main([*command, "--no-progress"]) == 0  # the intact model indexes

    _damage_weights(tmp_path / "run" / "model.safetensors")
    assert main([*command, "--overwrite", "--no-progress", "--on-error", "skip"]) == 2
    err = capsys.readouterr().err
    assert "gspdml: error" in err and "NaN or infinite embedding for 4 of 4 images" in err
    assert str(tmp_path / "images" / "green" / "0.png") in err
