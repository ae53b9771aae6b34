"""``gspdml tune CONFIG --space SPACE.yaml``: a hyper-parameter search over the tuning protocol
with Optuna's TPE sampler (Bergstra et al. 2011), stored in SQLite and resumable.

The papers chose the baselines' loss parameters by Musgrave et al. 2020's Bayesian search
(Gürbüz thesis §3.3.2.1 and §5.3.4.1; GSP paper supplement §1.1.7) and CCP's λ and number of
proxies by one on CUB (Gürbüz thesis §3.3.2.3, Fig. 3.5).

Each trial is the tuning protocol (:mod:`gspdml.workflows.protocol`) of the config with the
trial's values as overrides; its objective is the mean over the seeds of ``evaluation.metric``.
Trials live in ``<root>/trial<n>/``, reused or resumed model by model, so a killed search
continues: the study (``<root>/search.db``) is loaded again by name, a trial that was running is
marked failed, and new trials run until ``trials`` are complete. The best trial's config is
written to ``<root>/best.yaml``.

The search space is YAML, one entry per dotted config key::

    optimizer.lr: {float: [1.0e-5, 1.0e-3], log: true}
    loss.neg_margin: {float: [0.2, 0.8]}
    model.pooling.num_prototypes: {int: [16, 128], step: 16}
    loss.reduction: {categorical: [mean, avg_nonzero]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gspdml.config import dump_config, load_config, parse_yaml
from gspdml.errors import ConfigError
from gspdml.output_files import atomic_write_text
from gspdml.workflows.protocol import DEFAULT_SEEDS, run_protocol

KINDS = ("float", "int", "categorical")


@dataclass(frozen=True)
class SearchRange:
    """One entry of a search space: a ``float`` or ``int`` range ``[low, high]`` (``log``: drawn
    on a log scale; ``step``: an int range's spacing) or ``categorical`` ``choices``."""

    kind: str
    low: float = 0.0
    high: float = 0.0
    choices: tuple[Any, ...] = ()
    log: bool = False
    step: int = 1

    @classmethod
    def read(cls, entry: Any, where: str) -> SearchRange:
        """The range of one YAML entry (module doc), checked."""
        kinds = [k for k in KINDS if isinstance(entry, dict) and k in entry]
        if len(kinds) != 1:
            raise ConfigError(where, f"give exactly one of {', '.join(KINDS)}, got {entry!r}")
        kind, values = kinds[0], entry[kinds[0]]
        unknown = sorted(set(entry) - {kind, "log", "step"})
        if unknown:
            raise ConfigError(where, f"unknown keys {unknown}; allowed: {kind}, log, step")
        if kind == "categorical":
            if not isinstance(values, list) or not values:
                raise ConfigError(where, f"categorical: expected a list, got {values!r}")
            return cls(kind, choices=tuple(values))
        if not isinstance(values, list) or len(values) != 2:
            raise ConfigError(where, f"{kind}: expected [low, high], got {values!r}")
        low, high = values
        return cls(
            kind, low, high, log=bool(entry.get("log", False)), step=int(entry.get("step", 1))
        )

    def suggest(self, trial: Any, key: str) -> Any:
        """The trial's value of this range for the config key ``key``."""
        if self.kind == "float":
            return trial.suggest_float(key, float(self.low), float(self.high), log=self.log)
        if self.kind == "int":
            return trial.suggest_int(
                key, int(self.low), int(self.high), step=self.step, log=self.log
            )
        return trial.suggest_categorical(key, list(self.choices))


def read_space(path: str | Path) -> dict[str, SearchRange]:
    """The search space of a YAML file, checked (module doc)."""
    try:
        entries = parse_yaml(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError("--space", f"{path}: cannot read the search space ({exc})") from None
    if not isinstance(entries, dict) or not entries:
        raise ConfigError("--space", f"{path}: expected a mapping of config keys to ranges")
    return {key: SearchRange.read(entry, f"{path}: {key}") for key, entry in entries.items()}


def suggest(trial: Any, space: Mapping[str, SearchRange]) -> list[str]:
    """The trial's values of ``space`` as ``key=value`` overrides."""
    overrides = []
    for key, entry in space.items():
        value = entry.suggest(trial, key)
        text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
        overrides.append(f"{key}={text}")
    return overrides


def run_search(
    config_source: str,
    space: Mapping[str, SearchRange],
    *,
    trials: int,
    overrides: Sequence[str] = (),
    seeds: Sequence[int] = DEFAULT_SEEDS,
    output_dir: str | Path | None = None,
    sampler_seed: int = 0,
) -> dict[str, Any]:
    """Run (or continue) the search until the study has ``trials`` complete trials; returns
    ``{"best_value", "best_overrides", "best_config", "trials", "storage"}``."""
    import optuna

    base = load_config(config_source, overrides)
    default_root = Path(base.output_dir) / f"{base.name}-search"
    root = default_root if output_dir is None else Path(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{(root / 'search.db').resolve()}"
    metric = base.evaluation.metric
    study = optuna.create_study(
        study_name=base.name,
        storage=storage,
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=sampler_seed),
        load_if_exists=True,
    )
    for stale in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(stale.number, state=optuna.trial.TrialState.FAIL)  # died with the last search

    def objective(trial: Any) -> float:
        chosen = suggest(trial, space)
        trial.set_user_attr("overrides", chosen)
        config = load_config(config_source, [*overrides, *chosen])
        result = run_protocol(
            config, "tuning", seeds=seeds, output_dir=root / f"trial{trial.number}"
        )
        return float(result["summary"]["val"][metric]["mean"])

    done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if trials > done:
        study.optimize(objective, n_trials=trials - done)
    best = study.best_trial
    best_config = load_config(config_source, [*overrides, *best.user_attrs["overrides"]])
    atomic_write_text(root / "best.yaml", dump_config(best_config))
    return {
        "best_value": best.value,
        "best_overrides": best.user_attrs["overrides"],
        "best_config": str(root / "best.yaml"),
        "trials": len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))),
        "storage": storage,
    }
