"""Every phase of a run on the run's device (issue 37, item 3): training (bf16 and channels_last
where ``precision: auto`` picks bf16), validation rounds and the test evaluation (their search on
CUDA tensors), ``gspdml evaluate``, ``gspdml index`` and ``report`` (embedding on CUDA), the fair
protocol's summary, pre-training (``trainer.device``) and the feature cache (maps kept on CUDA)."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gspdml.cli import main
from gspdml.compat.hardware import auto_precision
from gspdml.config import load_config
from gspdml.evaluation import aggregate, service
from gspdml.models import build_embedder
from gspdml.models.feature_cache import FeatureCache
from gspdml.retrieval import embedding
from gspdml.training import Trainer
from gspdml.training.pretrain import pretrained_state
from tests.helpers.cuda import CUDA

pytestmark = CUDA


@pytest.fixture
def searched_on(monkeypatch):
    """The device of every query tensor the evaluation service searches with."""
    seen: list[str] = []
    original = service.retrieval_metrics

    def recording(query, *args, **kwargs):
        seen.append(torch.as_tensor(query).device.type)
        return original(query, *args, **kwargs)

    monkeypatch.setattr(service, "retrieval_metrics", recording)
    return seen


def _tiny_run(make_config, tmp_path, **trainer):
    config = load_config(
        make_config(
            schedule={"max_steps": 4},
            evaluation={"every": 2, "patience": None},
            trainer={"device": "cuda", "progress": False, **trainer},
        )
    )
    return Trainer.from_config(config, tmp_path / "run")


def test_training_validation_and_test_run_on_cuda(make_config, tmp_path, searched_on):
    trainer = _tiny_run(make_config, tmp_path, precision="auto")
    if auto_precision(trainer.device).precision == "bf16":
        assert trainer.precision == "bf16" and trainer.layout == torch.channels_last
        conv = next(m for m in trainer.model.modules() if isinstance(m, torch.nn.Conv2d))
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert torch.backends.cudnn.benchmark
    assert {p.device.type for p in trainer.model.parameters()} == {"cuda"}
    trainer.fit()
    assert searched_on and set(searched_on) == {"cuda"}  # two rounds, the baseline, the test


def test_gspdml_evaluate_searches_on_the_runs_device(make_config, tmp_path, searched_on):
    trainer = _tiny_run(make_config, tmp_path)
    trainer.fit()
    searched_on.clear()
    assert main(["evaluate", str(trainer.run_dir)]) == 0
    assert searched_on == ["cuda"]


def test_index_and_report_embed_on_cuda(make_config, tmp_path, monkeypatch):
    trainer = _tiny_run(make_config, tmp_path)
    trainer.fit()
    devices: list[str] = []
    original = embedding.embed

    precisions: list[str] = []

    def recording(model, dataset, batch_size, device, **kwargs):
        devices.append(torch.device(device).type)
        precisions.append(kwargs["precision"].precision)
        assert {p.device.type for p in model.parameters()} == {"cuda"}
        return original(model, dataset, batch_size, device, **kwargs)

    monkeypatch.setattr(embedding, "embed", recording)
    run = str(trainer.run_dir)
    assert main(["index", run, "--split", "test", "--out", str(tmp_path / "index")]) == 0
    assert main(["report", run, "--out", str(tmp_path / "report.html"), "--queries", "2"]) == 0
    assert devices and set(devices) == {"cuda"}
    # the run's precision (auto) resolved for the GPU, as the trainer resolved it
    assert set(precisions) == {trainer.precision}


def test_the_fair_summary_searches_on_the_given_device(monkeypatch):
    seen: list[str] = []
    original = aggregate.evaluate_embeddings

    def recording(query, *args, **kwargs):
        seen.append(torch.as_tensor(query).device.type)
        return original(query, *args, **kwargs)

    monkeypatch.setattr(aggregate, "evaluate_embeddings", recording)
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(10).repeat_interleave(3).numpy()
    splits = {
        (fold, 0): (torch.randn(30, 8, generator=generator).numpy(), labels) for fold in range(2)
    }
    aggregate.fair_protocol_results(splits, device=torch.device("cuda"))
    assert seen and set(seen) == {"cuda"}


def test_pre_training_runs_on_the_device_it_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))
    tiny = {
        "backbone": {"name": "small_cnn", "widths": [4, 8]},
        "data": {"source": "digits", "tiles_per_class": 1},
        "train": {"epochs": 1, "batch_size": 50, "precision": "fp32"},
    }
    _, record = pretrained_state(tiny, verbose=False, device="cuda")
    assert record["device"].startswith("cuda")
    _, on_cpu = pretrained_state(tiny, verbose=False, device="cpu")
    assert on_cpu["device"] == "cpu"


def test_the_feature_cache_keeps_its_maps_on_cuda():
    model = build_embedder(
        {
            "backbone": {"name": "small_cnn", "widths": [8, 16], "frozen": True},
            "embedding_dim": 8,
            "pooling": {"name": "gap"},
        },
        3,
    ).cuda()
    cache = FeatureCache(progress=False)
    images = torch.randn(4, 3, 32, 32, device="cuda")
    first = cache(model.backbone, images)
    again = cache(model.backbone, images)
    assert cache.hits == 4 and first.device.type == again.device.type == "cuda"
    assert {m.device.type for m in cache._maps.values()} == {"cuda"}


class _HostCopies(TorchDispatchMode):
    """Counts the elements copied from a CUDA tensor to the host."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten._to_copy.default:
            source, target = args[0], out
        elif func is torch.ops.aten.copy_.default:
            target, source = args[0], args[1]
        else:
            return out
        if source.device.type == "cuda" and target.device.type == "cpu":
            self.elements += source.numel()
        return out


def test_the_feature_cache_keys_a_cuda_batch_without_copying_it_to_the_host():
    model = build_embedder(
        {
            "backbone": {"name": "small_cnn", "widths": [8, 16], "frozen": True},
            "embedding_dim": 8,
            "pooling": {"name": "gap"},
        },
        3,
    ).cuda()
    cache = FeatureCache(progress=False)
    cache(model.backbone, torch.randn(2, 3, 32, 32, device="cuda"))  # the weights' digest
    images = torch.randn(4, 3, 32, 32, device="cuda")
    with _HostCopies() as copies:
        cache(model.backbone, images)
        cache(model.backbone, images)
    assert cache.hits == 4
    assert copies.elements <= 2 * 2 * len(images)  # two int64 keys per image, twice
