"""One YAML file describes one run completely; :class:`RunConfig` is its typed, frozen form.

``load_config(source, overrides)`` reads the file or preset with its ``base`` includes and the
command-line overrides (:mod:`gspdml.config.loading`), then checks everything against the run
schema (:mod:`gspdml.settings.sections`, the single source of every default and check) and the
component registries (:mod:`gspdml.config.components`) before any work: unknown sections or keys,
values of the wrong type or out of range and unknown component names fail with a
:class:`~gspdml.errors.ConfigError` naming the field and the allowed values.

Code builds variants of a config with :func:`dataclasses.replace`; :func:`validated` checks such
a config again. :func:`gspdml.config.migration.read_run_config` reads a run's ``config.yaml``,
also one an earlier release wrote.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

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
from gspdml.config.options import component_registries
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


#: how many checked configs :func:`validated` remembers
REMEMBERED = 32
#: checked configs by their YAML form, the working directory they were checked in (relative
#: dataset paths) and the registered components they were checked against; a config is also
#: remembered by the form it was read in (``load_config``: before the dataset's defaults and
#: absolute paths were filled in), so reading the same file again checks nothing
_CHECKED: OrderedDict[tuple[Any, ...], RunConfig] = OrderedDict()

#: libyaml's emitter where PyYAML has it (the same YAML, several times faster)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_config(source: Source, overrides: Iterable[str] = ()) -> RunConfig:
    """Resolve and check a run config (see the module docstring)."""
    return validated(read_config(source, DEFAULTS, overrides))


def validated(config: RunConfig | Mapping[str, Any]) -> RunConfig:
    """``config`` checked again from scratch (one built with ``dataclasses.replace``, or a plain
    mapping in the YAML form). A config equal to one checked before in this process and working
    directory is that checked config: the entries that hand a run's config on (``load_config``,
    ``Trainer.from_config``, ``Trainer``, ``train``) check it, and build its pooling and loss for
    their value checks, once."""
    key = _key(config)
    if key is not None and key in _CHECKED:
        _CHECKED.move_to_end(key)
        return _CHECKED[key]
    checked = _checked(read_config(plain(config), DEFAULTS))
    if key is not None:  # keyed by the registries after the check (it imports the plugins)
        _remember((*key[:2], _registries()), checked)
    return _remember(_key(checked), checked)


def _key(config: RunConfig | Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The key :data:`_CHECKED` remembers ``config`` by; None for a mapping that is no YAML
    data (a value of another type, keys of mixed types): the check names what is wrong."""
    try:
        text = yaml.dump(plain(config), Dumper=_DUMPER, sort_keys=True)
    except (yaml.YAMLError, TypeError):
        return None
    return text, os.getcwd(), _registries()


def _registries() -> tuple[Any, ...]:
    return tuple(r.fingerprint() for r in component_registries().values())


def _remember(key: tuple[Any, ...] | None, config: RunConfig) -> RunConfig:
    if key is None:
        return config
    _CHECKED[key] = config
    _CHECKED.move_to_end(key)
    while len(_CHECKED) > REMEMBERED:
        _CHECKED.popitem(last=False)
    return config


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
