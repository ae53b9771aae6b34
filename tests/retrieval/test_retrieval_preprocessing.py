import numpy as np
import pytest
import torch
import yaml
from PIL import Image
from torch.utils.data import Dataset

from gspdml.config import load_config
from gspdml.data import DATASETS, DataSplits, EvalSplit, load_image
from gspdml.data.eval_transform import EvalTransform, parse_eval_transform, run_eval_transform
from gspdml.data.recipes import NORMALIZATIONS, image_transform
from gspdml.errors import ConfigError
from gspdml.retrieval import Encoder
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.preprocessing import (
    DatasetTransform,
    eval_transform_from_config,
    eval_transform_of,
    load_model_input,
)
from gspdml.training import load_run
from tests.helpers.retrieval import EVAL_TRANSFORM, register_for_test, run_cli, write_run


def rgb_file(tmp_path, height=30, width=50, seed=0):
    pixels = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    path = tmp_path / "image.png"
    Image.fromarray(pixels).save(path)
    return path, pixels


def test_crop_and_normalisation_match_numpy(tmp_path):
    path, pixels = rgb_file(tmp_path)
    spec = {"center_crop": [20, 25], "mean": [0.1, 0.2, 0.3], "std": [0.5, 0.25, 2.0]}
    out = load_model_input(path, eval_transform_of(spec, None, 0, 3))
    top, left = int(round((30 - 20) / 2)), int(round((50 - 25) / 2))
    expected = (pixels[top : top + 20, left : left + 25] / 255.0 - [0.1, 0.2, 0.3]) / [
        0.5,
        0.25,
        2.0,
    ]
    np.testing.assert_allclose(out.permute(1, 2, 0).numpy(), expected, atol=1e-6)

    spec = {"mean": [104.0, 117.0, 128.0], "std": [1, 1, 1], "bgr": True, "value_range": 255}
    out = load_model_input(path, eval_transform_of(spec, None, 0, 3))
    np.testing.assert_allclose(
        out.permute(1, 2, 0).numpy(), pixels[:, :, ::-1] - [104.0, 117.0, 128.0], atol=1e-4
    )
    transform = eval_transform_of(spec, None, 0, 3)
    np.testing.assert_allclose(transform.to_display(out), pixels / 255.0, atol=1e-6)


def test_resize_keeps_aspect_and_exact_sizes(tmp_path):
    path, _ = rgb_file(tmp_path)
    shorter = eval_transform_of({"resize": 12}, None, 0, 3)
    assert tuple(load_model_input(path, shorter).shape) == (3, 12, 20)
    exact = eval_transform_of({"resize": [7, 9], "channels": 1}, None, 0, 1)
    out = load_model_input(path, exact)
    grey = (
        np.asarray(Image.open(path).convert("L").resize((9, 7), Image.BILINEAR), dtype=np.float32)
        / 255
    )
    np.testing.assert_allclose(out[0].numpy(), grey, atol=1e-6)
    assert exact.output_size == (7, 9) and shorter.output_size is None


def test_fallback_without_spec_uses_model_channels(tmp_path):
    path, pixels = rgb_file(tmp_path)
    transform = eval_transform_of(None, None, 0, 1)
    assert transform == EvalTransform(channels=1)
    grey = np.asarray(Image.open(path).convert("L"), dtype=np.float32) / 255
    np.testing.assert_allclose(load_model_input(path, transform)[0].numpy(), grey)


def test_search_and_evaluation_pad_an_image_smaller_than_the_crop(tmp_path):
    """One evaluation pipeline: a file smaller than the centre crop is padded with black (not
    refused) by the run's transform exactly as by the dataset recipes' evaluation transform."""
    path, pixels = rgb_file(tmp_path, height=6, width=10)
    imagenet = NORMALIZATIONS["imagenet"]
    spec = {
        "resize": 5,
        "center_crop": 9,
        "mean": list(imagenet["mean"]),
        "std": list(imagenet["std"]),
    }
    out = load_model_input(path, eval_transform_of(spec, None, 0, 3))
    recipe = image_transform("center", train=False, normalization="imagenet", resize=5, crop=9)
    torch.testing.assert_close(out, recipe(load_image(path), None), atol=0, rtol=0)
    assert tuple(out.shape) == (3, 9, 9)
    black = (0 - torch.tensor(imagenet["mean"])) / torch.tensor(imagenet["std"])
    torch.testing.assert_close(
        out[:, :2, 0], black[:, None].expand(3, 2)
    )  # 5 rows padded to 9: 2 above


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"resize": 32, "flip": True}, "data.eval_transform.flip"),
        ({"channels": 1}, "data.eval_transform.channels"),
        ({"mean": [0.5, 0.5, 0.5]}, "data.eval_transform.std"),
        ({"mean": [0.5], "std": [0.5]}, "data.eval_transform.mean"),
        ({"center_crop": -3}, "data.eval_transform.center_crop"),
        ({"mean": [0, 0, 0], "std": [1, 0, 1]}, "data.eval_transform.std"),
    ],
)
def test_bad_transform_specs_name_the_field(spec, field):
    with pytest.raises(ConfigError) as err:
        eval_transform_of(spec, None, 0, 3)
    assert err.value.field == field


def test_an_eval_transform_built_in_code_needs_mean_and_std_together():
    """Built directly (not parsed), a mean without std used to fail only when applied, as a
    TypeError from ``torch.tensor(None)``."""
    with pytest.raises(ConfigError, match="mean and std must be given together"):
        EvalTransform(3, mean=(0.5, 0.5, 0.5))


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"resize": 32, "flip": True}, "data.eval_transform.flip"),
        ({"mean": [0.5, 0.5, 0.5]}, "data.eval_transform.std"),
        ({"channels": 2}, "data.eval_transform.channels"),
        ({"resize": [8, 8, 8]}, "data.eval_transform.resize"),
        ({"center_crop": [8]}, "data.eval_transform.center_crop"),
        ({"value_range": 0}, "data.eval_transform.value_range"),
        ("resize 32", "data.eval_transform"),
    ],
)
def test_load_config_checks_the_eval_transform(spec, field):
    with pytest.raises(ConfigError) as err:
        load_config({"data": {"eval_transform": spec}})
    assert err.value.field == field


def test_eval_transform_is_a_config_key_and_a_recorded_one_reads_back():
    """Fails on the old code: load_config refused data.eval_transform ('unknown key'), the key
    that the messages of retrieval told users to set."""
    spec = {
        "resize": 256,
        "center_crop": 227,
        "mean": [104.0, 117.0, 128.0],
        "std": [1.0] * 3,
        "bgr": True,
        "value_range": 255,
    }
    assert load_config({"data": {"eval_transform": spec}})["data"]["eval_transform"] == spec
    assert load_config({})["data"]["eval_transform"] is None
    recipes = (image_transform("mlrc"), image_transform("proxynca", normalization="bn_inception"))
    for transform in recipes:
        text = yaml.safe_dump(transform.describe())  # as config.yaml records it
        assert parse_eval_transform(yaml.safe_load(text), channels=3) == transform


def glyphs(seed, count=6, size=12):
    return np.random.default_rng(seed).integers(0, 256, size=(count, size, size), dtype=np.uint8)


class GreyArrays(Dataset):
    """uint8 images normalised on access as (x - mean) / std (the layout of in-memory collages)."""

    channels = 1

    def __init__(self, images, mean, std):
        self.images, self.mean, self.std = images, mean, std
        self.labels = np.arange(len(images), dtype=np.int64) % 3
        self.class_names = ["ring", "bar", "dot"]

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return ((torch.from_numpy(self.images[i]).float() / 255 - self.mean) / self.std)[None], int(
            self.labels[i]
        )


class ImageFiles(Dataset):
    """Image files with a seeded ``transform(image, generator)`` (the convention of gspdml.data)."""

    channels = 3

    def __init__(self, paths):
        self.paths, self.labels = paths, np.zeros(len(paths), dtype=np.int64)

    @staticmethod
    def transform(image, generator):
        array = np.asarray(image.convert("RGB").crop((2, 1, 10, 9)), dtype=np.float32)
        return torch.from_numpy(array).permute(2, 0, 1) / 127.5 - 1

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with Image.open(self.paths[i]) as image:
            return self.transform(image, None), 0


def retrieval_test_arrays(seed=0):
    return DataSplits(
        train=GreyArrays(glyphs(seed), 0.4, 0.3),
        test=EvalSplit(GreyArrays(glyphs(seed + 1), 0.4, 0.3)),
    )


def retrieval_test_files(root, seed=0):
    return DataSplits(train=ImageFiles([root]), test=EvalSplit(ImageFiles([root])))


retrieval_test_arrays.supplied_by_caller = retrieval_test_files.supplied_by_caller = ("seed",)


def write_old_arrays_run(run_dir):
    """A run on the grey arrays written before the trainer recorded its evaluation transform."""
    write_run(run_dir, channels=1, dataset={"name": "retrieval_test_arrays"}, eval_transform=None)


@pytest.fixture
def datasets(monkeypatch):
    register_for_test(monkeypatch, DATASETS, "retrieval_test_arrays", retrieval_test_arrays)
    register_for_test(monkeypatch, DATASETS, "retrieval_test_files", retrieval_test_files)


def test_transform_from_an_array_dataset_reproduces_its_tensors(tmp_path, datasets):
    """A PNG of a dataset image, searched for, must become the tensor evaluation used."""
    write_old_arrays_run(tmp_path / "run")
    config, model = load_run(tmp_path / "run")
    assert model.backbone.features[0][0].in_channels == 1
    transform = eval_transform_from_config(config, 1)
    dataset = retrieval_test_arrays(seed=0).test.query
    for i in range(3):
        Image.fromarray(dataset.images[i]).save(tmp_path / f"{i}.png")
        torch.testing.assert_close(
            load_model_input(tmp_path / f"{i}.png", transform), dataset[i][0], atol=1e-6, rtol=0
        )
    recorded = run_eval_transform(None, retrieval_test_arrays(seed=0))  # what the trainer records
    assert parse_eval_transform(recorded, channels=1) == transform
    Image.fromarray(dataset.images[0]).resize((24, 24), Image.NEAREST).save(tmp_path / "big.png")
    assert tuple(load_model_input(tmp_path / "big.png", transform).shape) == (1, 12, 12)


def test_transform_from_an_image_file_dataset_is_its_own(tmp_path, datasets):
    path, pixels = rgb_file(tmp_path, 12, 12)
    dataset = {"name": "retrieval_test_files", "root": str(path)}
    transform = eval_transform_of(None, dataset, 0, 3)
    assert isinstance(transform, DatasetTransform) and transform.output_size == (8, 8)
    np.testing.assert_allclose(
        load_model_input(path, transform).numpy(), ImageFiles([path])[0][0].numpy()
    )


def test_index_a_dataset_split(tmp_path, datasets):
    write_old_arrays_run(tmp_path / "run")
    assert (
        run_cli(
            "index", tmp_path / "run", "--split", "test", "--out", tmp_path / "idx", "--no-progress"
        )
        == 0
    )
    index = RetrievalIndex.load(tmp_path / "idx")
    dataset = retrieval_test_arrays(seed=0).test.query
    assert (
        index.paths == [f"test/{i}" for i in range(6)]
        and index.labels == ["ring", "bar", "dot"] * 2
    )
    _, model = load_run(tmp_path / "run")
    with torch.no_grad():
        expected = model(torch.stack([dataset[i][0] for i in range(6)])).embedding
    torch.testing.assert_close(index.vectors, expected, atol=1e-5, rtol=0)
    with pytest.raises(ConfigError, match="either an IMAGES_DIR or --split"):
        run_cli("index", tmp_path / "run", tmp_path, "--split", "test", "--out", tmp_path / "idx2")


def test_report_on_the_run_test_split(tmp_path, datasets):
    write_old_arrays_run(tmp_path / "run")
    assert run_cli("report", tmp_path / "run", "--queries", "3", "-k", "2", "--no-progress") == 0
    page = (tmp_path / "run" / "report.html").read_text()
    grid = page.split('<div id="grid">', 1)[1]  # the sample of queries (the worst ones come before)
    assert grid.count('class="tile result') == 6 and grid.count('class="tile query"') == 3
    assert "ring" in page and "test/0" in page


def test_an_old_run_without_its_images_says_how_to_record_the_transform(tmp_path):
    """A run written before the trainer recorded its evaluation transform rebuilds its dataset to
    find it; once the images have moved, the error says which key to add, and adding it works."""
    write_run(tmp_path / "run", eval_transform=None)  # its image folder does not exist
    with pytest.raises(
        ConfigError,
        match=r"data.eval_transform: .*is not a directory.*add "
        r"data.eval_transform to the run's config.yaml",
    ):
        Encoder.from_run(tmp_path / "run", device="cpu")
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    config["data"]["eval_transform"] = EVAL_TRANSFORM
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(config))
    encoder = Encoder.from_run(tmp_path / "run", device="cpu")
    assert encoder.transform == parse_eval_transform(EVAL_TRANSFORM)


def test_an_encoder_names_pil_images_mixed_with_file_paths(tmp_path):
    """The old code passed the PIL image to ``Path`` (a TypeError that named no argument)."""
    write_run(tmp_path / "run")
    path, pixels = rgb_file(tmp_path)
    encoder = Encoder.from_run(tmp_path / "run", device="cpu")
    assert encoder([path]).shape == encoder([Image.fromarray(pixels)]).shape == (1, encoder.dim)
    with pytest.raises(ConfigError, match="images: 1 PIL images among 1 file paths"):
        encoder([path, Image.fromarray(pixels)])
