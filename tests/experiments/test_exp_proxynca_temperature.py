"""experiments/proxynca_temperature: each ablation row removes exactly its component."""

import json

import pytest
from exp_loader import load_common, load_experiment

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
