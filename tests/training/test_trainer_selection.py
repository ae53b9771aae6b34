"""What the trainer's validation rounds log and select by: the harmonic mean of NMI and R@1
(``evaluation.metric: nmi_r1_hmean``) and the post-processed metrics (``evaluation.postprocess``,
``evaluation.select_postprocessed``)."""

import json

import pytest

from gspdml.config import load_config
from gspdml.evaluation import metrics as metrics_module
from gspdml.evaluation.selection import harmonic_mean
from gspdml.evaluation.service import EvalSpec, evaluate
from gspdml.training import Trainer
from gspdml.training.callbacks import Callback


def rounds(run_dir, split="val"):
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["split"] == split and not r.get("final")]


def test_rounds_log_nmi_and_select_the_best_harmonic_mean(tmp_path, make_config):
    config = load_config(
        make_config(evaluation={"every": 5, "patience": None, "metric": "nmi_r1_hmean"})
    )
    results = Trainer.from_config(config, tmp_path / "run").fit()
    val = rounds(tmp_path / "run")
    assert len(val) == 6
    for r in val:
        assert 0 <= r["nmi"] <= 1
        assert r["nmi_r1_hmean"] == pytest.approx(harmonic_mean(r["nmi"], r["precision_at_1"]))
    best = max(val, key=lambda r: r["nmi_r1_hmean"])
    assert results["best_step"] == best["step"] and results["best_nmi_r1_hmean"] == pytest.approx(
        best["nmi_r1_hmean"]
    )
    assert "nmi_r1_hmean" in results["test"]


def test_selection_follows_the_harmonic_mean_not_map_at_r(tmp_path, make_config, monkeypatch):
    """NMI is scripted so that the round with the best MAP@R so far clusters badly (NMI 0.01)
    and every other round perfectly (NMI 1): the harmonic mean must pick another round."""
    best_map = [-1.0]
    real = metrics_module.clustering_scores

    def scripted(embeddings, labels, **kwargs):
        from gspdml.evaluation.service import evaluate_embeddings

        value = evaluate_embeddings(embeddings, labels).metrics["map_at_r"]
        nmi = 0.01 if value >= best_map[0] else 1.0
        best_map[0] = max(best_map[0], value)
        return {**real(embeddings, labels, **kwargs), "nmi": nmi}

    monkeypatch.setattr(metrics_module, "clustering_scores", scripted)
    config = load_config(
        make_config(
            evaluation={"every": 2, "patience": None, "metric": "nmi_r1_hmean"},
            optimizer={"lr": 3e-2},
            schedule={"max_steps": 12},  # 6 rounds
        )
    )
    results = Trainer.from_config(config, tmp_path / "run").fit()
    val = rounds(tmp_path / "run")
    by_map = max(val, key=lambda r: r["map_at_r"])
    by_hmean = max(val, key=lambda r: r["nmi_r1_hmean"])
    assert by_map["step"] != by_hmean["step"]
    assert results["best_step"] == by_hmean["step"]


class RecomputePostprocessed(Callback):
    """At every round, the post-processed metrics of the round's model by the final evaluation's function."""

    def __init__(self, steps):
        self.steps, self.seen = steps, []

    def on_evaluation(self, trainer, metrics):
        spec = EvalSpec(
            recall_at=trainer.config.evaluation.recall_at, postprocess=tuple(self.steps)
        )
        expected = evaluate(
            trainer.model,
            trainer.eval_split,
            spec,
            device="cpu",
            precision="fp32",
            batch_size=trainer.config.data.eval_batch_size,
            train_split=trainer.data.train,
        ).postprocessed()
        self.seen.append((trainer.step, expected, dict(metrics)))


@pytest.mark.parametrize("select_postprocessed", [False, True])
def test_rounds_log_post_processed_metrics_and_select_by_the_option(
    tmp_path, make_config, select_postprocessed
):
    steps = [{"name": "pca_whiten", "dim": 8}, "dba", "qe"]
    config = load_config(
        make_config(
            evaluation={
                "every": 5,
                "patience": None,
                "postprocess": steps,
                "select_postprocessed": select_postprocessed,
            }
        )
    )
    check = RecomputePostprocessed(steps)
    trainer = Trainer.from_config(config, tmp_path / "run", callbacks={"check": check})
    results = trainer.fit()
    val = rounds(tmp_path / "run")
    assert (
        [r["step"] for r in val] == [step for step, _, _ in check.seen] == [5, 10, 15, 20, 25, 30]
    )
    for record, (_, expected, metrics) in zip(val, check.seen):
        logged = {
            k[len("postprocessed_") :]: v
            for k, v in record.items()
            if k.startswith("postprocessed_")
        }
        assert logged.keys() == expected.keys()
        for key, value in expected.items():
            assert logged[key] == pytest.approx(value, abs=1e-6), key
        assert {k: v for k, v in metrics.items() if k.startswith("postprocessed_")} == {
            k: v for k, v in record.items() if k.startswith("postprocessed_")
        }
    # on this run the plain and the post-processed MAP@R peak at different rounds (steps 15 and 30)
    assert (
        max(val, key=lambda r: r["map_at_r"])["step"]
        != max(val, key=lambda r: r["postprocessed_map_at_r"])["step"]
    )
    key = "postprocessed_map_at_r" if select_postprocessed else "map_at_r"
    best = max(val, key=lambda r: r[key])
    assert results["best_step"] == best["step"] and results["best_" + key] == pytest.approx(
        best[key]
    )
    assert all(
        r["best"] == pytest.approx(max(v[key] for v in val[: i + 1])) for i, r in enumerate(val)
    )
    assert "postprocessed_map_at_r" in results["test"]


def test_only_whitening_embeds_the_training_split_and_plain_rounds_log_no_extra_metrics(
    tmp_path, make_config, monkeypatch
):
    config = load_config(
        make_config(evaluation={"every": 10, "patience": None, "postprocess": ["qe"]})
    )
    trainer = Trainer.from_config(config, tmp_path / "run")
    embed = trainer.embed  # other splits may be embedded (e.g. TensorBoard's test projector)

    def embed_no_training_split(dataset):
        if dataset is trainer.train_dataset:
            pytest.fail("qe needs no training embeddings")
        return embed(dataset)

    monkeypatch.setattr(trainer, "embed", embed_no_training_split)
    trainer.fit()
    assert all("postprocessed_map_at_r" in r for r in rounds(tmp_path / "run"))
    plain = load_config(make_config(evaluation={"every": 10, "patience": None}))
    Trainer.from_config(plain, tmp_path / "plain").fit()
    assert not any(
        k.startswith("postprocessed_") or k == "nmi" for r in rounds(tmp_path / "plain") for k in r
    )
