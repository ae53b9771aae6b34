"""Start a model from the weights of a finished run (``model.init_from: RUN_DIR``).

Fine-tuning a trained model with another head or pooling, as the GSP paper's LIBC+GSP rows do
(GSP paper, supplement §1.3): the run's final weights are copied into every tensor of the new
model with the same name and shape; the other tensors keep their initialisation, and the run's
tensors without a place are left out. A same-named tensor of another shape, or no shared tensor,
is a :class:`~gspdml.errors.ConfigError`. ``{seed}`` in the path is the new run's seed.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from gspdml.errors import ConfigError
from gspdml.training.checkpoint import CheckpointError
from gspdml.training.run_dir import WEIGHTS_FILE, read_weights

FIELD = "model.init_from"


@dataclass(frozen=True)
class Initialised:
    """What :func:`initialise_from_run` did: the tensors it copied, left new and left out."""

    source: Path
    loaded: tuple[str, ...]
    new: tuple[str, ...]
    unused: tuple[str, ...]

    def describe(self) -> str:
        """One line for the run's header."""
        parts = [f"model initialised from {self.source}: {len(self.loaded)} tensors loaded"]
        if self.new:
            shown = ", ".join(self.new[:4]) + (", ..." if len(self.new) > 4 else "")
            parts.append(f"{len(self.new)} new ({shown})")
        if self.unused:
            parts.append(f"{len(self.unused)} of the run unused")
        return "; ".join(parts)


def init_source(template: str, seed: int) -> Path:
    """The weights file ``model.init_from`` names for the run of ``seed`` (module docstring)."""
    run_dir = Path(_with_seed(template, seed))
    if not run_dir.is_dir():
        raise ConfigError(FIELD, f"{run_dir} is not a directory: name a finished run's folder")
    path = run_dir / WEIGHTS_FILE
    if not path.is_file():
        raise ConfigError(
            FIELD, f"{path} does not exist: the run {run_dir} has not finished; train it first"
        )
    return path


def _with_seed(template: str, seed: int) -> str:
    """``template`` with ``{seed}`` (any integer format) replaced; any other placeholder is a
    ConfigError."""
    fix = "the only placeholder is {seed} (with an optional integer format, e.g. {seed:02d})"
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
        unknown = [name for name in fields if name != "seed"]
        text = None if unknown else template.format(seed=seed)
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as error:
        raise ConfigError(FIELD, f"{template!r}: {fix} ({error})") from None
    if text is None:
        raise ConfigError(FIELD, f"{template!r}: unknown placeholder {{{unknown[0]}}}; {fix}")
    return text


def initialise_from_run(model: nn.Module, template: str, seed: int) -> Initialised:
    """Copy the matching tensors of the run ``template`` names (module docstring) into ``model``."""
    path = init_source(template, seed)
    try:
        stored, _ = read_weights(path)
    except CheckpointError as error:
        raise ConfigError(FIELD, f"{error}") from None
    own = model.state_dict()
    reshaped = [
        f"{name}: {tuple(stored[name].shape)} in the run, {tuple(tensor.shape)} here"
        for name, tensor in own.items()
        if name in stored and stored[name].shape != tensor.shape
    ]
    if reshaped:
        raise ConfigError(
            FIELD,
            f"{path}: tensors of the same name but another shape ({'; '.join(reshaped)}); "
            "init_from copies a model into one of the same architecture where names meet "
            "(e.g. the same backbone and embedding size)",
        )
    loaded = {name: stored[name] for name in own if name in stored}
    if not loaded:
        raise ConfigError(
            FIELD,
            f"{path} shares no tensor name with this model (the run's model.backbone differs?)",
        )
    model.load_state_dict(loaded, strict=False)
    return Initialised(
        path,
        tuple(loaded),
        tuple(name for name in own if name not in stored),
        tuple(name for name in stored if name not in own),
    )
