"""The one embedding function (gspdml.models.inference.embed) on retrieval image files:
batched result = per-image forward, positions as labels, progress lines, clear size error."""

import pytest
import torch

from gspdml.data.eval_transform import EvalTransform
from gspdml.errors import DataError
from gspdml.models.inference import embed
from gspdml.retrieval.encoder import load_model_and_transform
from gspdml.retrieval.sources import ImageFiles, list_image_folder
from tests.helpers.retrieval import MEAN, STD, write_image_folder, write_run


def test_batched_embedding_of_image_files_matches_single_forwards(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GSPDML_PROGRESS_SECONDS", "0")  # a progress line at every batch
    write_image_folder(tmp_path / "images", per_class=3)
    write_run(tmp_path / "run", pooling="gsp")
    _, model, transform = load_model_and_transform(tmp_path / "run", torch.device("cpu"))
    paths, labels, _ = list_image_folder(tmp_path / "images")
    files = ImageFiles(paths, labels, transform)
    model.train()
    capsys.readouterr()
    vectors, positions = embed(model, files, batch_size=4, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert model.training  # mode restored
    assert err[0] == "gspdml: embedding 9 images: 4/9 images (44%)" + err[0].split("(44%)")[1]
    assert len(err) == 4 and "9/9 images (100%), done in" in err[-1], err
    assert positions.tolist() == list(range(len(paths))) and positions.dtype == torch.int64
    model.eval()
    with torch.no_grad():
        single = torch.cat([model(files[i][0][None]).embedding for i in range(len(files))])
    torch.testing.assert_close(vectors, single, atol=1e-5, rtol=0)
    embed(model, files, batch_size=4)
    assert capsys.readouterr().err == ""


def test_images_of_different_sizes_name_the_fix(tmp_path):
    small = write_image_folder(tmp_path / "a", classes=("red",), per_class=1, size=(20, 20))
    large = write_image_folder(tmp_path / "b", classes=("red",), per_class=1, size=(30, 24))
    write_run(tmp_path / "run")
    _, model, _ = load_model_and_transform(tmp_path / "run", torch.device("cpu"))
    files = ImageFiles(
        [str(small[0]), str(large[0])],
        [None, None],
        EvalTransform(3, mean=tuple(MEAN), std=tuple(STD)),
    )
    with pytest.raises(DataError, match=r"different sizes.*data.eval_transform"):
        embed(model, files, batch_size=2)
    assert embed(model, files, batch_size=1)[0].shape == (2, 32)
