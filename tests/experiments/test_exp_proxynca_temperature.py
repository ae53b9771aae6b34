"""experiments/proxynca_temperature: the configs of the sweep and of the Table 7 rows under both
settings of the paper's optimiser and of the sweep in the fine-tuning regime, the verdict rules on
hand-made summaries, smoke runs of all three parts and of the fine-tuned sweep, and the published
results.json."""

import json
from pathlib import Path

import pytest

from gspdml.config import load_config
from gspdml.dotted_keys import dotted_keys
from tests.helpers.experiments import load_experiment

proxynca = load_experiment("proxynca_temperature")


def _differences(a, b):
    a, b = dotted_keys(a.to_dict()), dotted_keys(b.to_dict())
    return {
        key: b.get(key) for key in set(a) | set(b) if a.get(key) != b.get(key) and key != "name"
    }


def _stat(mean, std=1.0):
    return {"mean": mean, "std": std, "values": [mean]}


def _entry(r1, std=1.0, map_at_r=None):
    return {
        "recall_at_1": _stat(r1, std),
        "map_at_r": _stat(r1 if map_at_r is None else map_at_r, std),
        "failed": {},
    }


@pytest.mark.parametrize(
    "row, changed",
    [
        ("ProxyNCA++", {}),
        ("-scale", {"loss.temperature": 1.0}),
        ("-max", {"model.pooling.name": "gap"}),
        ("-norm", {"model.pooled_norm": None}),
        ("-cbs", {"data.sampler": "random"}),
        ("-fast", {"loss.lr_multiplier": 1.0}),
        ("-prob", {"loss.assignment_probability": False}),
    ],
)
def test_each_ablation_row_changes_exactly_its_component(row, changed):
    full, ablated = proxynca.ablation_config("ProxyNCA++"), proxynca.ablation_config(row)
    assert _differences(full, ablated) == changed
    # the change the ablation table prints, as an override of the full model, is the row's config
    printed = proxynca.ABLATION[row][1]
    overrides = [*([printed] if printed else []), f"name={ablated.name}"]
    assert load_config(full.to_dict(), overrides) == ablated


def test_full_model_is_the_papers_proxynca_pp_in_the_papers_regime_with_the_papers_optimiser():
    full = dotted_keys(proxynca.ablation_config("ProxyNCA++").to_dict())
    assert (full["loss.name"], full["loss.temperature"], full["loss.assignment_probability"]) == (
        "proxynca_pp",
        1 / 9,
        True,
    )
    assert (full["model.pooling.name"], full["model.head"], full["model.pooled_norm"]) == (
        "gmp",
        "global",
        "layer_norm",
    )
    # fast proxies x1e5 go with Adam eps = 1 (never the class default x1, never eps 1e-8)
    assert (full["optimizer.eps"], full["optimizer.weight_decay"], full["loss.lr_multiplier"]) == (
        1.0,
        0.0,
        1e5,
    )
    assert full["data.dataset.name"] == "collage_shared" and full["model.backbone.frozen"] is True
    assert full["model.backbone.weights"] == "resnet20-digits"
    assert (
        full["evaluation.split"],
        full["evaluation.restore_best"],
        full["evaluation.patience"],
    ) == ("val", True, 6)
    # the -fast row keeps eps = 1: it ablates the proxy speed only
    assert dotted_keys(proxynca.ablation_config("-fast").to_dict())["optimizer.eps"] == 1.0


def test_sweep_points_change_only_the_temperature_and_shared_rows_are_the_same_run():
    for temperature in proxynca.SWEEP_TEMPERATURES:
        changed = _differences(proxynca.sweep_config(1 / 9), proxynca.sweep_config(temperature))
        assert changed == ({} if temperature == 1 / 9 else {"loss.temperature": temperature})
    assert proxynca.ablation_config("ProxyNCA++") == proxynca.sweep_config(
        1 / 9
    )  # name included: one run dir
    assert proxynca.ablation_config("-scale") == proxynca.sweep_config(1.0)
    assert proxynca.ablation_config("-max")["name"] == "no-max"
    assert [proxynca.temperature_label(t) for t in proxynca.SWEEP_TEMPERATURES] == [
        "1/27",
        "1/9",
        "1/3",
        "1",
        "2",
    ]


def test_the_paper_lr_setting_changes_only_the_base_lr_of_every_config():
    """Both parts under ``paper-lr`` are the ``paper`` configs with ``optimizer.lr`` 4e-3 (ProxyNCA++ paper
    Table 1) instead of the demo's 1e-3: same regime, seeds, budget, selection rule, eps and proxy
    multiplier; only the run names differ (their own run directories)."""
    configs = [(proxynca.sweep_config, t) for t in proxynca.SWEEP_TEMPERATURES] + [
        (proxynca.ablation_config, r) for r in proxynca.ABLATION
    ]
    for make, arg in configs:
        paper, paper_lr = make(arg), make(arg, optimiser="paper-lr")
        assert paper["optimizer"]["lr"] == 1e-3
        assert _differences(paper, paper_lr) == {"optimizer.lr": 0.004}
        assert paper_lr["name"] == paper["name"] + "-paper-lr"
    assert proxynca.ablation_config("ProxyNCA++", optimiser="paper-lr") == proxynca.sweep_config(
        1 / 9, optimiser="paper-lr"
    )
    assert proxynca.ablation_config("-scale", optimiser="paper-lr") == proxynca.sweep_config(
        1.0, optimiser="paper-lr"
    )
    assert [
        proxynca.part_key(p, o) for p in ("sweep", "ablation") for o in proxynca.OPTIMISERS
    ] == ["sweep", "sweep-paper-lr", "ablation", "ablation-paper-lr"]


#: the settings of the paper's optimiser as override strings
OPTIMISER_OVERRIDES = {"paper": [], "paper-lr": ["optimizer.lr=0.004"]}


def test_frozen_configs_are_unchanged_by_the_regime_option():
    """The frozen sweep configs are the ones the published frozen runs trained (their run
    directories are reused): rebuilt here from the papers' regime and the override strings the
    script used before its configs were derived by ``dataclasses.replace``, in their original order,
    they equal the script's, with and without ``regime="frozen"``."""
    for optimiser, lr_override in OPTIMISER_OVERRIDES.items():
        for smoke in (False, True):
            regime = proxynca.common.papers_regime("demo-gmp", smoke).to_dict()
            for temperature in proxynca.SWEEP_TEMPERATURES:
                label = proxynca.temperature_label(temperature).replace("/", "-")
                name = f"T{label}" if optimiser == "paper" else f"T{label}-{optimiser}"
                reference = load_config(
                    regime,
                    [
                        "model.pooled_norm=layer_norm",
                        "loss={name: proxynca_pp, assignment_probability: true}",
                        "optimizer.eps=1.0",
                        "optimizer.weight_decay=0.0",
                        "loss.lr_multiplier=100000.0",
                        *lr_override,
                        "loss.temperature=0.1111111111111111",
                        f"loss.temperature={temperature!r}",
                        f"name={name}",
                    ],
                )
                for cfg in (
                    proxynca.sweep_config(temperature, smoke, optimiser),
                    proxynca.sweep_config(temperature, smoke, optimiser, regime="frozen"),
                ):
                    assert cfg == reference
                    assert cfg.model.backbone["frozen"] is True
                    assert cfg.optimizer.lr_multipliers.backbone == 1.0


#: what ``common.finetuned`` changes in a resolved config
FINETUNE_KEYS = {
    "model.backbone.frozen": False,
    "model.cache_backbone_features": False,
    "optimizer.lr_multipliers.backbone": 0.1,
}


def test_the_finetune_regime_changes_only_the_finetune_keys_and_the_name():
    """The fine-tuned sweep point is the frozen one plus ``common.finetuned`` (backbone trained at
    0.1 x the lr, its maps no longer cached): same optimiser, seeds, budget and selection rule;
    its own run directory and key."""
    for optimiser in proxynca.OPTIMISERS:
        for smoke in (False, True):
            for temperature in proxynca.SWEEP_TEMPERATURES:
                frozen = proxynca.sweep_config(temperature, smoke, optimiser)
                finetune = proxynca.sweep_config(temperature, smoke, optimiser, regime="finetune")
                assert _differences(frozen, finetune) == FINETUNE_KEYS
                assert finetune["name"] == frozen["name"] + "-finetune"
    assert proxynca.part_key("sweep", "paper-lr", "finetune") == "sweep-paper-lr-finetune"
    assert proxynca.part_key("sweep", "paper", "finetune") == "sweep-finetune"
    assert (
        proxynca.sweep_plot_name("paper-lr", "finetune")
        == "temperature_sweep-paper-lr-finetune.png"
    )


def test_inverted_u_rule():
    peak = {"1/27": _entry(50), "1/9": _entry(70), "1": _entry(60), "2": _entry(40)}
    close = {"1/27": _entry(69.5), "1/9": _entry(70), "2": _entry(40)}
    edge = {"1/27": _entry(80), "1/9": _entry(70), "2": _entry(40)}
    assert proxynca.inverted_u(peak, "recall_at_1") == "reproduced; peak at T = 1/9"
    assert proxynca.inverted_u(close, "recall_at_1").startswith("partly")
    assert proxynca.inverted_u(edge, "recall_at_1") == "not reproduced (peak at the end, T = 1/27)"


def test_ablation_rules():
    table = {
        "ProxyNCA++": _entry(70),
        "-scale": _entry(60),
        "-max": _entry(66),
        "-prob": _entry(69.5),
    }
    assert proxynca.largest_drop(table, "recall_at_1") == "reproduced"
    assert (
        proxynca.every_component_helps(table, "recall_at_1")
        == "partly (a drop beyond one std in 2/3 rows: -scale, -max)"
    )
    table["-max"] = _entry(55)
    assert (
        proxynca.largest_drop(table, "recall_at_1")
        == "not reproduced (largest drop -max -15.00, -scale -10.00)"
    )
    better = {"ProxyNCA++": _entry(70), "-scale": _entry(72), "-max": _entry(75)}
    assert proxynca.every_component_helps(better, "recall_at_1").startswith(
        "not reproduced (a drop beyond one std in 0/2"
    )
    assert proxynca.moons_verdict({"1": 0.90, "1/3": 0.91, "1/9": 0.91}) == "reproduced"
    assert proxynca.moons_verdict({"1": 0.90, "1/3": 0.92, "1/9": 0.91}).startswith(
        "not reproduced"
    )


@pytest.fixture(scope="module")
def all_parts(tmp_path_factory):
    """The smoke run of all parts under both optimiser settings, trained once for the tests that
    read it: its folder and its payloads, which the readers leave as they are."""
    out = tmp_path_factory.mktemp("proxynca_all_parts")
    return out, proxynca.main(["--smoke", "--out", str(out)])


def test_smoke_run_of_all_parts_under_both_optimiser_settings(all_parts):
    tmp_path, payloads = all_parts
    saved = json.loads((tmp_path / "results.json").read_text())
    assert list(saved["runs"]) == [
        "two-moons",
        "sweep",
        "ablation",
        "sweep-paper-lr",
        "ablation-paper-lr",
    ]
    assert open(saved["runs"]["two-moons"]["plot"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    for name in ("temperature_sweep.png", "temperature_sweep-paper-lr.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for suffix, lr in (("", 1e-3), ("-paper-lr", 0.004)):
        sweep, table = payloads["sweep" + suffix], payloads["ablation" + suffix]
        assert list(sweep["results"]) == ["1/9", "1"]
        assert list(table["results"]) == list(proxynca.SMOKE["rows"])
        assert (
            sweep["plan"]["optimizer"]
            == table["plan"]["optimizer"]
            == {"lr": lr, "eps": 1.0, "weight_decay": 0.0}
        )
        # the shared rows are the sweep's runs (trained once), -fast has its own
        assert table["results"]["ProxyNCA++"] is sweep["results"]["1/9"]
        assert "| -fast | `loss.lr_multiplier=1.0` |" in table["table"]
        for entry in table["results"].values():
            assert len(entry["recall_at_1"]["values"]) == 1 and all(
                0.0 <= v <= 100.0 for m in proxynca.METRICS for v in entry[m]["values"]
            )
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "T1",
        "T1-9",
        "T1-9-paper-lr",
        "T1-paper-lr",
        "no-fast",
        "no-fast-paper-lr",
    ]
    rows = saved["reproduction"]
    assert [r["experiment"].split(" (")[0] for r in rows] == [
        "ProxyNCA++ temperature on two moons",
        "ProxyNCA++ temperature sweep, collage_shared, frozen ResNet20, paper's optimiser, base lr 1e-3",
        "ProxyNCA++ ablation, collage_shared, frozen ResNet20, paper's optimiser, base lr 1e-3",
        "ProxyNCA++ ablation, collage_shared, frozen ResNet20, paper's optimiser, base lr 1e-3",
        "ProxyNCA++ temperature sweep, collage_shared, frozen ResNet20, paper's optimiser, paper's base lr 4e-3",
        "ProxyNCA++ ablation, collage_shared, frozen ResNet20, paper's optimiser, paper's base lr 4e-3",
        "ProxyNCA++ ablation, collage_shared, frozen ResNet20, paper's optimiser, paper's base lr 4e-3",
    ]
    assert rows[1]["verdict"].startswith(
        "R@1: not reproduced (peak at the end"
    )  # two temperatures: both are ends
    assert rows[4]["verdict"].startswith("R@1: not reproduced (peak at the end")
    # the paper-lr rows are read from their own keys: dropping them drops only those rows
    assert (
        proxynca.reproduction(
            {k: v for k, v in saved["runs"].items() if not k.endswith("-paper-lr")}
        )
        == rows[:4]
    )


def test_smoke_run_of_the_fine_tuned_sweep(tmp_path, all_parts):
    """``--regime finetune --parts sweep`` trains the sweep into its own run directories, under its
    own key and row, after the frozen sweep of the same optimiser (of the all-parts smoke run); the
    moons are refused (no backbone)."""
    payloads = proxynca.main(
        [
            "--smoke",
            "--out",
            str(tmp_path),
            "--regime",
            "finetune",
            "--optimiser",
            "paper-lr",
            "--parts",
            "sweep",
        ]
    )
    saved = json.loads((tmp_path / "results.json").read_text())
    assert list(payloads) == list(saved["runs"]) == ["sweep-paper-lr-finetune"]
    sweep = payloads["sweep-paper-lr-finetune"]
    assert list(sweep["results"]) == ["1/9", "1"]
    assert sweep["plan"]["backbone"] == {"frozen": False, "lr_multiplier": 0.1}
    assert sweep["plan"]["optimizer"] == {"lr": 0.004, "eps": 1.0, "weight_decay": 0.0}
    assert (tmp_path / "temperature_sweep-paper-lr-finetune.png").read_bytes()[
        :8
    ] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "T1-9-paper-lr-finetune",
        "T1-paper-lr-finetune",
    ]
    [row] = saved["reproduction"]
    assert row["experiment"] == (
        "ProxyNCA++ temperature sweep, collage_shared, ResNet20 fine-tuned at 0.1x the lr, "
        "paper's optimiser, paper's base lr 4e-3 (ProxyNCA++ paper §3.4, Fig. 4a)"
    )
    assert row["verdict"].startswith("R@1: not reproduced (peak at the end")
    # the fine-tuned row comes after every frozen row, whatever else is published
    frozen = {"sweep-paper-lr": all_parts[1]["sweep-paper-lr"]}
    rows = proxynca.reproduction({**frozen, **payloads})
    assert [r["experiment"] for r in rows] == [
        "ProxyNCA++ temperature sweep, collage_shared, frozen ResNet20, paper's optimiser, paper's base lr 4e-3 (ProxyNCA++ paper §3.4, Fig. 4a)",
        row["experiment"],
    ]
    assert frozen["sweep-paper-lr"]["plan"]["backbone"] == {"frozen": True, "lr_multiplier": 1.0}
    for parts in (["moons"], ["sweep", "moons"]):
        with pytest.raises(SystemExit):
            proxynca.main(
                ["--smoke", "--out", str(tmp_path), "--regime", "finetune", "--parts", *parts]
            )


def test_the_fine_tuned_ablation_changes_only_the_finetune_keys_and_publishes_its_own_rows(
    tmp_path,
):
    for row in proxynca.ABLATION:
        frozen = proxynca.ablation_config(row, False, "paper-lr")
        finetune = proxynca.ablation_config(row, False, "paper-lr", "finetune")
        assert _differences(frozen, finetune) == FINETUNE_KEYS, row
        assert finetune["name"] == frozen["name"] + "-finetune"
    payloads = proxynca.main(
        ["--smoke", "--out", str(tmp_path), "--regime", "finetune", "--optimiser", "paper-lr"]
    )
    assert list(payloads) == ["sweep-paper-lr-finetune", "ablation-paper-lr-finetune"]
    assert payloads["ablation-paper-lr-finetune"]["plan"]["backbone"] == {
        "frozen": False,
        "lr_multiplier": 0.1,
    }
    rows = proxynca.reproduction(payloads)
    assert [r["experiment"].split(" (ProxyNCA++ paper")[0] for r in rows] == [
        "ProxyNCA++ temperature sweep, collage_shared, ResNet20 fine-tuned at 0.1x the lr, paper's optimiser, paper's base lr 4e-3",
        "ProxyNCA++ ablation, collage_shared, ResNet20 fine-tuned at 0.1x the lr, paper's optimiser, paper's base lr 4e-3",
        "ProxyNCA++ ablation, collage_shared, ResNet20 fine-tuned at 0.1x the lr, paper's optimiser, paper's base lr 4e-3",
    ]


def test_selecting_temperatures_splits_the_sweep_and_marks_it_partial():
    assert proxynca.select_temperatures(proxynca.FULL, None) == (proxynca.FULL, False)
    plan, partial = proxynca.select_temperatures(proxynca.FULL, ["2", "1/27", "1/3"])
    assert plan["temperatures"] == (1 / 27, 1 / 3, 2.0) and partial
    assert (plan["seeds"], plan["rows"]) == (proxynca.FULL["seeds"], proxynca.FULL["rows"])
    every = [proxynca.temperature_label(t) for t in proxynca.SWEEP_TEMPERATURES]
    assert proxynca.select_temperatures(proxynca.FULL, every) == (proxynca.FULL, False)


def test_published_results_hold_both_settings_and_their_rows():
    """The committed results.json: every part under both settings and the fine-tuned sweep, 3
    seeds, the optimiser (and backbone regime) of each in its plan, and README rows that
    :func:`reproduction` recomputes from them."""
    stored = json.loads((Path(proxynca.__file__).parent / "results.json").read_text())
    runs = stored["runs"]
    assert {"two-moons", "sweep", "ablation", "sweep-paper-lr", "ablation-paper-lr"} <= set(runs)
    for optimiser, lr in (("paper", 1e-3), ("paper-lr", 0.004)):
        for part in ("sweep", "ablation"):
            plan = runs[proxynca.part_key(part, optimiser)]["plan"]
            assert (
                plan["seeds"] == [0, 1, 2]
                and plan["max_steps"] == 300
                and plan["lr_multiplier"] == 1e5
            )
            assert plan["optimizer"] == {"lr": lr, "eps": 1.0, "weight_decay": 0.0}
    finetune = runs["sweep-paper-lr-finetune"]["plan"]
    assert (
        finetune["seeds"] == [0, 1, 2]
        and finetune["max_steps"] == 300
        and finetune["lr_multiplier"] == 1e5
    )
    assert finetune["optimizer"] == {"lr": 0.004, "eps": 1.0, "weight_decay": 0.0}
    assert finetune["backbone"] == {"frozen": False, "lr_multiplier": 0.1}
    assert finetune["temperatures"] == list(runs["sweep-paper-lr"]["results"])
    ablation = runs["ablation-paper-lr-finetune"]["plan"]
    assert ablation["backbone"] == {"frozen": False, "lr_multiplier": 0.1} and ablation[
        "rows"
    ] == list(proxynca.ABLATION)
    assert ablation["seeds"] == [0, 1, 2] and ablation["optimizer"] == {
        "lr": 0.004,
        "eps": 1.0,
        "weight_decay": 0.0,
    }
    assert stored["reproduction"] == proxynca.reproduction(runs)
    assert len(stored["reproduction"]) == 10


def test_two_moons_classifier_learns_the_moons():
    import torch
    from sklearn.datasets import make_moons

    points, labels = make_moons(n_samples=600, noise=0.3, random_state=0)
    x, y = torch.tensor(points, dtype=torch.float32), torch.tensor(labels)
    net = proxynca.moons_classifier(1 / 9, 300, x, y)
    assert float((net(x).argmax(1) == y).float().mean()) > 0.85  # a linear boundary gets about 0.84
