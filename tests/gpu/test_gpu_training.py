"""Training, embedding and indexing on CUDA: bf16 autocast, fp16 with a gradient scaler, the
GSP layer inside a run, restore-best from a checkpoint read onto the GPU, and CUDA tensors given
to the faiss indexes."""

import math

import numpy as np
import pytest
import torch

from gspdml.config import load_config
from gspdml.models import build_embedder
from gspdml.models.inference import embed
from gspdml.training import Trainer
from tests.helpers.cuda import CUDA, full_float32

pytestmark = CUDA
POOLINGS = {
    "gap": {"name": "gap"},
    "gsp": {"name": "gsp", "num_prototypes": 8, "iters": 30, "init": "random"},
}


@pytest.mark.parametrize("pooling", sorted(POOLINGS))
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_tiny_run_trains_on_cuda_with_a_finite_loss(make_config, tmp_path, precision, pooling):
    config = load_config(
        make_config(
            model={"pooling": POOLINGS[pooling]},
            schedule={"max_steps": 6},
            evaluation={"every": 3, "patience": None},
            trainer={"device": "cuda", "precision": precision, "progress": False},
        )
    )
    trainer = Trainer.from_config(config, tmp_path / "run")
    assert {p.device.type for p in trainer.model.parameters()} == {"cuda"}
    assert (trainer.scaler is not None) == (precision == "fp16")
    results = trainer.fit()
    assert results["steps"] == 6 and math.isfinite(trainer.last_loss)
    assert 0.0 <= results["test"]["map_at_r"] <= 1.0
    if trainer.scaler is not None:
        assert math.isfinite(trainer.scaler.get_scale()) and trainer.scaler.get_scale() > 0


def test_embed_on_cuda_equals_the_cpu_and_returns_cpu_tensors():
    torch.manual_seed(0)
    model = build_embedder(
        {
            "backbone": {"name": "small_cnn", "widths": [8, 16, 16]},
            "embedding_dim": 16,
            "pooling": {"name": "gap"},
        },
        3,
    )
    items = [(torch.randn(3, 32, 32), label) for label in range(40)]
    cpu, cpu_labels = embed(model, items, batch_size=16)
    with full_float32():
        cuda, cuda_labels = embed(model.cuda(), items, batch_size=16, device="cuda")
    assert (
        cuda.device.type == "cpu"
        and cuda.dtype == torch.float32
        and torch.equal(cuda_labels, cpu_labels)
    )
    torch.testing.assert_close(cuda, cpu, rtol=1e-4, atol=1e-5)
    mixed, _ = embed(model, items, batch_size=16, device="cuda", precision="bf16")
    assert mixed.dtype == torch.float32 and (mixed - cpu).abs().max() <= 3e-2 * cpu.abs().max()


@pytest.mark.parametrize("backend", ["ivf", "ivfpq"])
def test_faiss_indexes_take_cuda_tensors(backend):
    """Built, searched and re-ranked (ivfpq: exact distances to the stored vectors) from CUDA
    tensors, an index answers as from the same numpy arrays."""
    pytest.importorskip("faiss")
    from gspdml.retrieval import ann

    x = torch.from_numpy(np.random.default_rng(0).normal(size=(800, 16)).astype(np.float32))
    params = ann.AnnParams(backend, nlist=8, pq_m=4)
    on_host = ann.build(x.numpy(), params)
    on_device = ann.build(x.cuda(), params)
    found_host = ann.search(on_host, params, x[:20].numpy(), 5, vectors=x.numpy())
    found_device = ann.search(on_device, params, x[:20].cuda(), 5, vectors=x.cuda())
    assert all(torch.equal(a, b) for a, b in zip(found_host, found_device))
