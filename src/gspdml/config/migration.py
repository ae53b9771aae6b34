"""A run directory's ``config.yaml`` read back as a :class:`~gspdml.config.RunConfig`, also when
an earlier release wrote it.

What changed between the releases that wrote run configs, and how it is read:

* 0.1.0 wrote the resolved config without a header. Every key it wrote still exists with the
  same meaning. ``data.eval_transform`` did not exist: it reads as null, so the run's evaluation
  transform is still taken from its dataset (which must then be readable where the run is used);
  a run trained since records the transform it was evaluated with. Values 0.1.0 accepted without
  a check (``model.head_bias: maybe``) are refused, naming the file and the field.
* Since 0.2.0 the file starts with ``# gspdml <version> run config``.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gspdml.config import RunConfig, validated
from gspdml.config.loading import parse_yaml, read_config_text
from gspdml.errors import ConfigError


def read_run_config(path: str | Path) -> RunConfig:
    """The checked config stored at ``path`` (a run's or a bundle's ``config.yaml``)."""
    path = Path(path)
    try:
        raw = parse_yaml(read_config_text(path))  # bounded: a received run's file
    except yaml.YAMLError as exc:
        raise ConfigError("", f"{path}: cannot read the run config ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(
            "", f"{path}: expected a mapping at the top level, got {type(raw).__name__}"
        )
    try:
        return validated(raw)
    except ConfigError as exc:
        raise ConfigError(
            exc.field, f"{path}: {str(exc).split(': ', 1)[-1] if exc.field else exc}"
        ) from None
