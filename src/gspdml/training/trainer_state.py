"""A trainer's checkpoint (``checkpoints/last.safetensors``): everything a resumed run needs to
end with the same weights as an uninterrupted one (weights, optimiser, schedules, scaler,
counters, random states, and each callback's state by its name)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gspdml.training.baseline import Baselines
from gspdml.training.callbacks import Callback
from gspdml.training.checkpoint import CheckpointError, load_state, save_state
from gspdml.training.resume_checks import check_checkpoint_shapes
from gspdml.training.rng import rng_state, set_rng_state
from gspdml.training.run_dir import check_layout
from gspdml.training.trainer_view import TrainerView

#: the trainer's counters a checkpoint restores, with their types; the last three are absent
#: from older checkpoints (their run reports no baseline, or judges it by query counts)
COUNTERS = {
    "step": int,
    "best_metric": float,
    "best_step": int,
    "bad_rounds": int,
    "stopped_early": bool,
    "finished": bool,
    "baseline": dict,
    "baseline_skipped": dict,
    "baseline_test_data": dict,
}
OPTIONAL_COUNTERS = ("baseline", "baseline_skipped", "baseline_test_data")
#: the counters' types, as an error names them
KINDS = {int: "a whole number", float: "a number", bool: "true or false", dict: "an object"}


#: what :func:`save_checkpoint` stores
PARTS = ("model", "loss", "optimizer", "plateau", "scaler", "trainer", "rng", "callbacks")
#: the fix of a checkpoint that is not this run's
OTHER_RUN_FIX = (
    "it is not this run's checkpoint (copied from another run?): put the run's own "
    "checkpoints/last.safetensors back, or start a new run"
)


def read_counters(counters: Any, path: Path) -> dict[str, Any]:
    """The trainer's own counters of a checkpoint, each of its type (a whole number is a float
    where a float is stored), and nothing else it might hold; never converted (``bool("no")`` is
    true, ``int(2.9)`` is 2): a value of another type is a :class:`CheckpointError`."""
    if not isinstance(counters, Mapping):
        raise CheckpointError(f"{path}: its trainer state is not an object; {OTHER_RUN_FIX}")
    unknown = sorted(set(counters) - set(COUNTERS))
    if unknown:
        raise CheckpointError(
            f"{path}: unknown trainer state {unknown}; known: {', '.join(COUNTERS)}"
        )
    missing = [key for key in COUNTERS if key not in counters and key not in OPTIONAL_COUNTERS]
    if missing:
        raise CheckpointError(f"{path}: no trainer state {', '.join(missing)}; {OTHER_RUN_FIX}")
    typed = {}
    for key, kind in COUNTERS.items():
        value = counters.get(key, {})
        whole = isinstance(value, int) and not isinstance(value, bool)
        if kind is float and whole:
            value = float(value)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise CheckpointError(
                f"{path}: trainer state {key!r} is {str(value)[:60]!r}, not {KINDS[kind]}; "
                f"{OTHER_RUN_FIX}"
            )
        typed[key] = value
    return typed


def restore_callbacks(saved: Any, callbacks: Mapping[str, Callback], path: Path) -> None:
    """Each callback's state by its name (a callback without saved state starts afresh; the
    empty state of a stateless callback that is gone is dropped)."""
    saved = saved or {}  # an older gspdml's list without callbacks reads as none
    if not isinstance(saved, dict):
        raise CheckpointError(
            f"{path} keeps callback state by position (an older gspdml); resume it with that version"
        )
    unknown = sorted(name for name, kept in saved.items() if kept and name not in callbacks)
    if unknown:
        raise CheckpointError(
            f"{path} holds the state of callbacks {unknown}, which this run does not have "
            f"(it has: {', '.join(callbacks) or 'none'})"
        )
    for name, callback in callbacks.items():
        if name in saved:
            callback.load_callback_state(saved[name])


def save_checkpoint(trainer: TrainerView) -> None:
    """Write the trainer's checkpoint (never the weights of a failed step)."""
    trainer._raise_if_not_finite()
    plateau, scaler, baselines = trainer.schedules.plateau, trainer.scaler, trainer.baselines
    counters: dict[str, Any] = {"step": trainer.step, "finished": trainer.finished}
    counters |= trainer.selection.state_dict()
    counters |= {"baseline": baselines.scores, "baseline_skipped": baselines.skipped}
    counters |= {"baseline_test_data": baselines.test_data}
    state = {
        "model": trainer.model.state_dict(),
        "loss": trainer.loss.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "plateau": plateau.state_dict() if plateau else None,
        "scaler": scaler.state_dict() if scaler else None,
        "trainer": counters,
        "rng": rng_state(),
        "callbacks": {name: c.callback_state() for name, c in trainer.callbacks.items()},
    }
    save_state(trainer.checkpoint_path, state, {"step": trainer.step})


def check_same_parts(state: Any, parts: Mapping[str, Any], path: Path) -> None:
    """Refuse a checkpoint that lacks a part of the trainer's state, or whose model or loss has
    other parameters and buffers than this run's (another model's checkpoint)."""
    missing = [name for name in PARTS if not isinstance(state, Mapping) or name not in state]
    if missing:
        raise CheckpointError(f"{path}: no {', '.join(missing)} state; {OTHER_RUN_FIX}")
    for name, module in parts.items():
        saved = state[name]
        if not isinstance(saved, Mapping):
            raise CheckpointError(f"{path}: its {name} state is not named tensors; {OTHER_RUN_FIX}")
        own = set(module.state_dict())
        lacking, extra = sorted(own - set(saved)), sorted(set(saved) - own)
        if lacking or extra:
            differ = [f"missing {', '.join(lacking[:3])}"] if lacking else []
            differ += [f"not in this run: {', '.join(map(str, extra[:3]))}"] if extra else []
            raise CheckpointError(
                f"{path}: its {name} is another one than this run's "
                f"{type(module).__name__} ({'; '.join(differ)}); {OTHER_RUN_FIX}"
            )


def restore_checkpoint(trainer: TrainerView, state: Mapping[str, Any]) -> None:
    """Put ``trainer`` in the state a checkpoint holds (its parts and shapes checked first)."""
    classes = len(getattr(trainer.train_dataset, "class_names", None) or [])
    parts = {"model": trainer.model, "loss": trainer.loss}
    check_same_parts(state, parts, trainer.checkpoint_path)
    check_checkpoint_shapes(state, parts, trainer.run_dir, classes)
    if trainer.best_path.is_file():  # restored at the end (evaluation.restore_best): now
        best = load_state(trainer.best_path)[0]
        fix = OTHER_RUN_FIX.replace("checkpoints/last.safetensors", "checkpoints/best.safetensors")
        check_layout(trainer.best_path, trainer.model, best, ("this run's model", fix))
    trainer.model.load_state_dict(state["model"])
    trainer.loss.load_state_dict(state["loss"])
    try:
        trainer.optimizer.load_state_dict(state["optimizer"])
    except (KeyError, TypeError, ValueError) as err:  # other parameter groups or sizes
        raise CheckpointError(
            f"{trainer.checkpoint_path}: its optimizer state does not fit this run's optimizer "
            f"({err}); {OTHER_RUN_FIX}"
        ) from None
    plateau, scaler = trainer.schedules.plateau, trainer.scaler
    if plateau and state["plateau"]:
        plateau.load_state_dict(state["plateau"])
    if scaler and state["scaler"]:
        scaler.load_state_dict(state["scaler"])
    counters = read_counters(state["trainer"], trainer.checkpoint_path)
    trainer.step, trainer.finished = counters["step"], counters["finished"]
    trainer.selection.load_state_dict(counters)
    trainer.baselines = Baselines(
        counters["baseline"], counters["baseline_skipped"], counters["baseline_test_data"]
    )
    restore_callbacks(state["callbacks"], trainer.callbacks, trainer.checkpoint_path)
    set_rng_state(state["rng"])
