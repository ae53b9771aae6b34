"""One YAML file describes one run completely; :class:`RunConfig` is its typed, frozen form.

``load_config(source, overrides)`` reads the file or preset with its ``base`` includes and the
command-line overrides (:mod:`gspdml.config.loading`), then checks everything against the run
schema (:mod:`gspdml.settings.sections`, the single source of every default and check) and the
component registries (:mod:`gspdml.config.components`) before any work: unknown sections or keys,
values of the wrong type or out of range and unknown component names fail with a
:class:`~gspdml.errors.ConfigError` naming the field and the allowed values.

Code builds variants of a config with :func:`dataclasses.replace`; :func:`validated` checks such
a config again (the trainer calls it). A run directory's ``config.yaml`` is read back with
:func:`gspdml.config.migration.read_run_config`, which also reads the configs earlier releases
wrote.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

import yaml

from gspdml.config.components import check_components, resolved_dataset
from gspdml.config.loading import (
    PRESETS_DIR,
    SPEC_FIELDS,
    Source,
    parse_yaml,
    preset_names,
    preset_path,
    read_config,
)
from gspdml.plugins import import_plugins, load_entry_points
from gspdml.settings.schema import plain
from gspdml.settings.sections import (
    DataConfig,
    EvaluationConfig,
    LrMultipliers,
    ModelConfig,
    OptimizerConfig,
    Plateau,
    RunConfig,
    ScheduleConfig,
    StepDecay,
    TrainerConfig,
)
from gspdml.version import __version__

#: the defaults of every field, in the YAML form (derived from the schema)
DEFAULTS: dict[str, Any] = RunConfig().to_dict()

__all__ = [
    "DEFAULTS",
    "PRESETS_DIR",
    "SPEC_FIELDS",
    "DataConfig",
    "EvaluationConfig",
    "LrMultipliers",
    "ModelConfig",
    "OptimizerConfig",
    "Plateau",
    "RunConfig",
    "ScheduleConfig",
    "Source",
    "StepDecay",
    "TrainerConfig",
    "dump_config",
    "load_config",
    "parse_yaml",
    "preset_names",
    "preset_path",
    "validated",
]


def load_config(source: Source, overrides: Iterable[str] = ()) -> RunConfig:
    """Resolve and check a run config (see the module docstring)."""
    return _checked(read_config(source, DEFAULTS, overrides))


def validated(config: RunConfig | Mapping[str, Any]) -> RunConfig:
    """``config`` checked again from scratch (one built with ``dataclasses.replace``, or a plain
    mapping in the YAML form)."""
    return _checked(read_config(plain(config), DEFAULTS))


def _checked(values: Mapping[str, Any]) -> RunConfig:
    config = RunConfig.from_mapping(values, "")
    load_entry_points()
    import_plugins(config.plugins)  # they register the components checked next
    check_components(config)
    data = dataclasses.replace(config.data, dataset=resolved_dataset(config.data.dataset))
    return dataclasses.replace(config, data=data)


def dump_config(config: RunConfig | Mapping[str, Any]) -> str:
    """The YAML of a run config, under a header naming the release that wrote it."""
    text: str = yaml.safe_dump(plain(config), sort_keys=False)
    return f"# gspdml {__version__} run config\n" + text
