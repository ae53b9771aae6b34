"""experiments/proxynca_temperature: each ablation row removes exactly its component."""

import json

import pytest
from tests.helpers.experiments import load_common, load_experiment

proxynca = load_experiment("proxynca_temperature")
common = load_common()


def _flat(tree, prefix=""):
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _config(row):
    return _flat(common.config("scratch-gap.yaml", [*proxynca.FULL_PROXYNCA, *proxynca.ABLATION[row][0]], steps=1, name="probe"))


@pytest.mark.parametrize("row, changed", [
    ("-scale", {"loss.temperature": 1.0}),
    ("-max", {"model.pooling.name": "gap"}),
    ("-cbs", {"data.classes_per_batch": 60, "data.samples_per_class": 1}),
    ("-fast", {"loss.lr_multiplier": 1.0}),
    ("-prob", {"loss.assignment_probability": False}),
])
def test_each_ablation_row_differs_from_proxynca_pp_in_its_component_only(row, changed):
    full, ablated = _config("ProxyNCA++"), _config(row)
    assert full["loss.name"] == "proxynca_pp" and full["model.pooling.name"] == "gmp"
    differences = {key: ablated.get(key) for key in set(full) | set(ablated) if full.get(key) != ablated.get(key)}
    assert differences == changed


def test_smoke_run_plots_two_moons_and_tabulates(tmp_path):
    payload = proxynca.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert open(saved["two_moons"]["plot"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert len(saved["two_moons"]["train_accuracy"]) == len(proxynca.TEMPERATURES)
    assert list(payload["ablation"]) == list(proxynca.SMOKE["rows"])
    for entry in payload["ablation"].values():
        assert all(0.0 <= v <= 100.0 for m in proxynca.METRICS for v in entry[m]["values"])
        r = [entry[f"recall_at_{k}"]["mean"] for k in (1, 2, 4, 8)]
        assert r == sorted(r)  # recall@k grows with k


def test_two_moons_classifier_learns_the_moons():
    import torch
    from sklearn.datasets import make_moons

    points, labels = make_moons(n_samples=600, noise=0.3, random_state=0)
    x, y = torch.tensor(points, dtype=torch.float32), torch.tensor(labels)
    net = proxynca.moons_classifier(1 / 9, 300, x, y)
    assert float((net(x).argmax(1) == y).float().mean()) > 0.85  # a linear boundary gets about 0.84


def test_sweep_uses_the_papers_optimiser_and_regime_and_changes_only_the_temperature():
    low, high = _flat(proxynca.sweep_config(1 / 27, smoke=False)), _flat(proxynca.sweep_config(2.0, smoke=False))
    assert {k for k in low if low[k] != high.get(k)} == {"loss.temperature", "name"}
    assert (low["optimizer.eps"], low["optimizer.weight_decay"], low["loss.lr_multiplier"]) == (1.0, 0.0, 1e5)
    assert low["data.dataset.name"] == "collage_shared" and low["model.backbone.frozen"] is True
    assert (low["model.pooling.name"], low["model.head"], low["model.pooled_norm"]) == ("gmp", "global", "layer_norm")


def test_smoke_sweep_tabulates_and_the_inverted_u_rule(tmp_path):
    payload = proxynca.main(["--sweep", "--smoke", "--out", str(tmp_path)])
    assert list(payload["results"]) == ["1/9", "1"] and (tmp_path / "sweep.json").is_file()
    stat = lambda m, s: {"recall_at_1": {"mean": m, "std": s, "values": [m]}, "failed": {}}  # noqa: E731
    peak = {"results": {"1/27": stat(50, 1), "1/9": stat(70, 1), "2": stat(40, 1)}}
    edge = {"results": {"1/27": stat(80, 1), "1/9": stat(70, 1), "2": stat(40, 1)}}
    assert proxynca.sweep_reproduction({"a": peak})[0]["verdict"] == "reproduced"
    assert proxynca.sweep_reproduction({"a": edge})[0]["verdict"].startswith("not reproduced (best at the end, T=1/27)")
