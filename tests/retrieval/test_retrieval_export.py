import json

import onnxruntime
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.models import Embedder
from gspdml.models.backbones.small_cnn import SmallCNN
from gspdml.pooling import Pooled, Pooling, flatten_locations
from gspdml.retrieval.encoder import load_model_and_transform
from gspdml.retrieval.export import ExportError, ExportMismatchError, export_embedder
from gspdml.retrieval.sources import folder_source
from gspdml.training import load_run
from tests.helpers.retrieval import MEAN, run_cli, write_image_folder, write_run


class BatchBranch(Pooling):
    """Average for batches of at most two images, max otherwise: tracing freezes the branch of
    the example batch, so an export of it is wrong for other batch sizes."""

    def forward(self, x):
        local, _ = flatten_locations(x)
        return Pooled(local.mean(1) if x.shape[0] <= 2 else local.amax(1))


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


class FunctionPooling(Pooling):
    """Average of features doubled by a custom autograd function (as GSP's closed-form backward)."""

    def forward(self, x):
        local, _ = flatten_locations(x)
        return Pooled(_Scale.apply(local.mean(1)))


def small_embedder(pooling):
    torch.manual_seed(0)
    backbone = SmallCNN(3)
    return Embedder(backbone, pooling, torch.nn.Conv2d(backbone.out_channels, 32, 1)).eval()


def real_images(tmp_path, run):
    write_image_folder(tmp_path / "images", per_class=2, seed=7)
    _, _, transform = load_model_and_transform(run, torch.device("cpu"))
    source = folder_source(tmp_path / "images", transform)
    return torch.stack([source.dataset[i][0] for i in range(len(source.paths))])


GSP = {"name": "gsp", "init": "random", "num_prototypes": 8, "iters": 20}


@pytest.mark.parametrize(
    "pooling", ["gap", "gmp", "simpool", GSP], ids=["gap", "gmp", "simpool", "gsp"]
)
def test_torchscript_export_matches_pytorch(tmp_path, pooling):
    run = tmp_path / "run"
    write_run(run, pooling=pooling)
    assert run_cli("export", run, "--format", "torchscript") == 0
    path = run / "export" / "embedder.pt"
    record = json.loads((run / "export" / "embedder.pt.json").read_text())
    assert record["input"]["shape"] == ["batch", 3, 32, 32] and record["output"]["shape"] == [
        "batch",
        32,
    ]
    assert 0 <= record["check"]["max_abs_diff"] <= 1e-5
    assert record["transform"]["mean"] == MEAN and record["run"]["weights"].startswith("sha256:")

    _, model = load_run(run)
    exported = torch.jit.load(str(path))
    images = real_images(tmp_path, run)
    with torch.no_grad():
        for batch in (images[:1], images):
            expected = model(batch).embedding
            torch.testing.assert_close(exported(batch), expected, atol=1e-5, rtol=0)
            assert torch.allclose(expected.norm(dim=1), torch.ones(len(batch)), atol=1e-5)


@pytest.mark.parametrize("pooling", ["gmp", "delf", GSP], ids=["gmp", "delf", "gsp"])
def test_onnx_export_matches_pytorch(tmp_path, pooling):
    run = tmp_path / "run"
    write_run(run, pooling=pooling)
    out = tmp_path / "model.onnx"
    assert run_cli("export", run, "--format", "onnx", "--out", out) == 0
    assert json.loads((tmp_path / "model.onnx.json").read_text())["check"]["max_abs_diff"] <= 1e-5
    _, model = load_run(run)
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    images = real_images(tmp_path, run)
    (actual,) = session.run(None, {"images": images.numpy()})
    with torch.no_grad():
        torch.testing.assert_close(
            torch.from_numpy(actual), model(images).embedding, atol=1e-5, rtol=0
        )


def test_check_catches_a_wrong_export(tmp_path):
    model = small_embedder(BatchBranch(32))
    with (
        pytest.warns(torch.jit.TracerWarning),
        pytest.raises(ExportMismatchError, match="differ from PyTorch"),
    ):
        export_embedder(model, "torchscript", tmp_path / "bad.pt", channels=3, size=(32, 32))
    assert json.loads((tmp_path / "bad.pt.json").read_text())["check"]["max_abs_diff"] > 1e-3


def test_export_needs_an_input_size(tmp_path):
    run = tmp_path / "run"
    write_run(run, eval_transform={"mean": [0.5] * 3, "std": [0.25] * 3})
    with pytest.raises(ConfigError, match="--image-size"):
        run_cli("export", run, "--format", "torchscript")
    assert run_cli("export", run, "--format", "torchscript", "--image-size", "24", "40") == 0
    assert json.loads((run / "export" / "embedder.pt.json").read_text())["input"]["shape"] == [
        "batch",
        3,
        24,
        40,
    ]


def test_autograd_functions_fail_torchscript_clearly_and_onnx_inlines_them(tmp_path):
    model = small_embedder(FunctionPooling(32))
    with pytest.raises(ExportError, match="torchscript export of the embedder failed.*Python"):
        export_embedder(model, "torchscript", tmp_path / "f.pt", channels=3, size=(32, 32))
    record = export_embedder(model, "onnx", tmp_path / "f.onnx", channels=3, size=(32, 32))
    assert record["check"]["max_abs_diff"] <= 1e-5


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_gsp_export_at_large_eps_traces_no_data_dependent_branch(tmp_path, fmt):
    """At eps = 100 the solver's column sums underflow the plain-domain floor for some inputs and
    not for others; the export must not freeze the branch of its example input."""
    import warnings

    run = tmp_path / "run"
    write_run(run, pooling={**GSP, "eps": 100.0})
    out = tmp_path / f"m.{'pt' if fmt == 'torchscript' else 'onnx'}"
    with warnings.catch_warnings():
        # a branch on a tensor is a conversion to a Python boolean (sizes may become constants:
        # the export fixes the image size)
        warnings.filterwarnings(
            "error", message=".*Python boolean", category=torch.jit.TracerWarning
        )
        assert run_cli("export", run, "--format", fmt, "--out", out) == 0
    _, model = load_run(run)
    images = real_images(tmp_path, run)
    # a batch that takes the plain-domain sums in PyTorch and one that needs the log domain
    batches = [images, images * 40.0]
    with torch.no_grad():
        for batch in batches:
            expected = model(batch).embedding
            if fmt == "torchscript":
                actual = torch.jit.load(str(out))(batch)
            else:
                session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
                actual = torch.from_numpy(session.run(None, {"images": batch.numpy()})[0])
            assert torch.isfinite(actual).all()
            torch.testing.assert_close(actual, expected, atol=1e-4, rtol=0)
