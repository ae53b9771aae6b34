"""The trainer's evaluation glue: a validation round with model selection and the final test
evaluation beside the baselines."""

from __future__ import annotations

from typing import Any

from gspdml.evaluation.selection import round_metrics, selection_key, selection_value
from gspdml.evaluation.service import EvalSpec
from gspdml.output_files import atomic_write_text, json_text
from gspdml.training.checkpoint import load_state
from gspdml.training.preflight import finish_lazy_initialisation
from gspdml.training.run_dir import RESULTS_FILE, WEIGHTS_FILE, save_weights
from gspdml.training.run_identity import identity
from gspdml.training.trainer_view import TrainerView


def validation_round(trainer: TrainerView) -> None:
    """Score the evaluation split, keep the best weights, log, step the plateau schedule and the
    callbacks, decide whether training is finished, and write the checkpoint."""
    ev, sel, step = trainer.config.evaluation, trainer.selection, trainer.step
    trainer._raise_if_not_finite()
    for line in finish_lazy_initialisation(trainer.model, step):
        trainer._say(line)
    metrics = trainer.evaluate_round(trainer.eval_split, metrics=round_metrics())
    value = selection_value(metrics, ev.metric, ev.select_postprocessed)
    if sel.record(value, step) and trainer.is_main:
        save_weights(trainer.best_path, trainer.model, trainer.data.channels, trainer.config)
    best = {"best": sel.best_metric} if sel.selects else {}
    trainer._log({"step": step, "split": ev.split, **metrics, **best})
    key = selection_key(ev.metric, ev.select_postprocessed)
    max_steps = trainer.config.schedule.max_steps
    record = f" (best {sel.best_metric:.4f} at step {sel.best_step})" if sel.selects else ""
    timing, wait = trainer.timing, ""
    if timing:
        wait = f"; data wait {timing['data_wait']:.0%} of {timing['seconds_per_step']:.3g} s/step"
    loss = f"loss {trainer.last_loss:.4f}"
    trainer._say(f"step {step}/{max_steps}: {loss}, {ev.split} {key} {value:.4f}{record}{wait}")
    if trainer.schedules.plateau:
        trainer.schedules.plateau.step(value, at_step=step)
    for callback in trainer.callbacks.values():
        callback.on_evaluation(trainer, metrics)
    trainer.finished = sel.stopped_early or step >= max_steps
    if trainer.is_main:
        trainer._save_checkpoint()
    if trainer.dist:
        trainer.dist.barrier()  # the checkpoint and best weights exist before any rank goes on


def final_results(trainer: TrainerView) -> dict[str, Any]:
    """The saved weights (the best round's with ``evaluation.restore_best``), their test
    metrics beside the baselines', and ``results.json`` (its content, returned)."""
    cfg, sel, ev = trainer.config, trainer.selection, trainer.config.evaluation
    trainer._raise_if_not_finite()
    weights_step = trainer.step  # the step the saved (and tested) weights come from
    if ev.restore_best and sel.selects and trainer.best_path.exists():
        trainer.model.load_state_dict(load_state(trainer.best_path, trainer.device)[0])
        weights_step = sel.best_step
    if trainer.is_main:
        save_weights(trainer.run_dir / WEIGHTS_FILE, trainer.model, trainer.data.channels, cfg)
    plateau = trainer.schedules.plateau
    results: dict[str, Any] = {
        "name": cfg.name,
        "steps": trainer.step,
        "best_step": sel.best_step,
        "weights_step": weights_step,
        "best_" + selection_key(ev.metric, ev.select_postprocessed): sel.best_metric,
        "stopped_early": sel.stopped_early,
        "lr_drop_steps": list(plateau.drops) if plateau else [],
    }
    if trainer.data.test is not None:
        test = results["test"] = trainer.evaluate_round(trainer.data.test)
        # which metrics the test report holds, and those computed only when named
        # (evaluation.metrics: the whole-ranking mAP and MRR, the metrics at a cutoff K)
        results["test_metrics"] = EvalSpec.from_evaluation(ev).metrics_computed()
        final = {"step": trainer.step, "split": "test", "final": True}
        trainer._log({**final, "weights_step": weights_step, **test})
        baselines, metric = trainer.baselines, selection_key(ev.metric)
        if baselines.scores:
            results["baseline"] = baselines.scores
        if baselines.skipped:
            results["baseline_skipped"] = baselines.skipped
        unlike = baselines.unlike(test, trainer.data_record) if baselines.scores else ""
        if unlike:  # the baselines were scored on other test data (--allow-data-change)
            results["baseline_note"] = unlike
        for line in baselines.report(metric, test, unlike):
            trainer._say(line)
    if trainer.is_main:
        results.update(identity(trainer.run_dir))
        atomic_write_text(trainer.run_dir / RESULTS_FILE, json_text(results, indent=2))
    return results
