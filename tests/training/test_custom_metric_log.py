"""``trainer.log.write`` as the README documents it: a callback's metric reaches metrics.jsonl
(read back by the report's reader) at the steps it wrote."""

from __future__ import annotations

import json

from gspdml.config import load_config
from gspdml.training import Callback, Trainer
from gspdml.training.metrics_log import MetricsLog


class GradNorm(Callback):
    def on_after_backward(self, trainer):
        if trainer.is_main and trainer.step % 2 == 0:
            norm = sum(p.grad.norm() ** 2 for p in trainer.model.parameters() if p.grad is not None)
            trainer.log.write(
                {"step": trainer.step, "split": "custom", "grad_norm": float(norm) ** 0.5}
            )


def test_a_callback_logs_a_metric_of_its_own(make_config, tmp_path):
    config = load_config(make_config(schedule={"max_steps": 4}, evaluation={"every": 4}))
    run = tmp_path / "run"
    Trainer.from_config(config, run, callbacks={"grad_norm": GradNorm()}).fit()
    custom = [r for r in MetricsLog(run / "metrics.jsonl").read() if r.get("split") == "custom"]
    assert [r["step"] for r in custom] == [0, 2]
    assert all(r["grad_norm"] > 0 for r in custom)
    assert all(json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines())
