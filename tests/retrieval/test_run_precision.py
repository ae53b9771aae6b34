"""``gspdml index``, ``search``, ``report`` and an :class:`Encoder` embed at the run's precision
(issue 37, item 3): a run whose ``trainer.precision`` is bf16 embeds under bf16 autocast with
its weights channels_last (the layout of bf16 on a CPU), one in fp32 without autocast. The
precision actually used is read from the model: a hook on its first convolution records the
dtype it computed in (bf16 under autocast, float32 without)."""

import pytest
import torch

from gspdml.compat.hardware import PrecisionChoice
from gspdml.evaluation import aggregate, service
from gspdml.retrieval import encoder
from gspdml.retrieval.encoder import Encoder
from gspdml.retrieval.index_folder import embed_queries, write_index
from gspdml.retrieval.report import report_run
from tests.helpers.retrieval import write_image_folder, write_run

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


@pytest.fixture
def computed_in(monkeypatch):
    """The dtype of every output of the first convolution of each run model loaded, and the
    layout of its weights."""
    seen: dict[str, list] = {"dtypes": [], "channels_last": []}
    original = encoder.load_run

    def loading(*args, **kwargs):
        config, model = original(*args, **kwargs)
        conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
        conv.register_forward_hook(lambda module, inputs, out: seen["dtypes"].append(out.dtype))
        seen["channels_last"].append(conv)
        return config, model

    monkeypatch.setattr(encoder, "load_run", loading)
    return seen


def _layouts(seen) -> set[bool]:
    return {
        conv.weight.is_contiguous(memory_format=torch.channels_last)
        for conv in seen["channels_last"]
    }


@pytest.mark.filterwarnings("ignore:precision bf16 on a CPU without bf16 units")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_index_search_report_and_encoder_embed_at_the_runs_precision(
    tmp_path, computed_in, precision
):
    write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=2)
    write_run(tmp_path / "run", pooling="gsp", trainer={"precision": precision})
    run, images = tmp_path / "run", tmp_path / "images"
    written = write_index(run, tmp_path / "index", images, note=print, progress=False)
    embed_queries(tmp_path / "index", written.index.paths[:1], device="cpu")
    report_run(run, tmp_path / "report.html", images, note=print, queries=2, progress=False)
    model = Encoder(run, device="cpu")
    model(written.index.paths[:2])
    model(torch.zeros(2, 3, 32, 32))  # a preprocessed batch
    # index, queries, report (embedding and the heatmaps' forward), encoder files and batch
    assert len(computed_in["dtypes"]) >= 6
    assert set(computed_in["dtypes"]) == {DTYPES[precision]}
    assert _layouts(computed_in) == {precision == "bf16"}
    assert model.precision.precision == precision
    assert written.index.vectors.dtype == torch.float32


def test_the_fair_summary_searches_at_the_runs_precision(monkeypatch):
    choice = PrecisionChoice("bf16", "the runs' precision")
    seen = []
    original = service.retrieval_metrics

    def recording(*args, precision, **kwargs):
        seen.append(precision)
        return original(*args, precision="fp32", **kwargs)

    monkeypatch.setattr(service, "retrieval_metrics", recording)
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(10).repeat_interleave(3).numpy()
    splits = {
        (fold, 0): (torch.randn(30, 8, generator=generator).numpy(), labels) for fold in range(2)
    }
    aggregate.fair_protocol_results(splits, device=torch.device("cpu"), precision=choice)
    assert len(seen) == 3 and all(p is choice for p in seen)  # two models, one concatenation
