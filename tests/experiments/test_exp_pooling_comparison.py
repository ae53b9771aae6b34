"""experiments/pooling_comparison: every pooling gives a 128-D embedding; the smoke run tabulates."""

import json

import pytest
import torch
from exp_loader import load_common, load_experiment

pooling = load_experiment("pooling_comparison")
common = load_common()


@pytest.mark.parametrize("name", list(pooling.POOLINGS))
def test_every_compared_pooling_embeds_in_128_dimensions(name):
    cfg = common.config("demo-gap.yaml", [f"model.pooling={pooling.POOLINGS[name][0]}"], steps=1, name="probe")
    from gspdml.models import build_embedder

    model = build_embedder(cfg["model"], in_channels=1).eval()
    with torch.no_grad():
        embedding = model(torch.randn(2, 1, 32, 32)).embedding
    assert embedding.shape == (2, 128)
    torch.testing.assert_close(embedding.norm(dim=1), torch.ones(2))


def test_smoke_run_prints_the_table4_layout(tmp_path):
    payload = pooling.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    lines = saved["table"].splitlines()
    assert lines[0].startswith("| pooling (128D MAP@R) | collage C2 | collage ProxyNCA++ |")
    assert [line.split(" | ")[0].lstrip("| ") for line in lines[2:]] == list(pooling.SMOKE["poolings"])
    for name in pooling.SMOKE["poolings"]:
        for loss in pooling.LOSSES:
            values = payload["results"][name][loss]["map_at_r"]["values"]
            assert len(values) == len(pooling.SMOKE["seeds"]) and all(0.0 <= v <= 100.0 for v in values)
    assert "| GSP |" in saved["table"] and "22.68 | 27.61" in saved["table"]  # the paper's Cifar-Collage row
