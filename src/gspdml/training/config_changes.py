"""``--resume`` refuses a config that differs from the saved ``config.yaml``, naming every
differing key; :data:`HARMLESS` keys may change with ``--allow-changes`` (``config.yaml`` is then
rewritten). A key the saved config predates is no difference at its default (options are added
with a default that keeps the earlier behaviour), nor is a null ``data.eval_transform`` (the
dataset's own, which ``config.yaml`` records)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gspdml.config import DEFAULTS, dump_config
from gspdml.dotted_keys import dotted_keys
from gspdml.errors import ConfigError

#: keys whose value does not change what the weights become
HARMLESS = (
    "description",
    "output_dir",
    "data.num_workers",
    "data.eval_batch_size",
    "trainer.device",
    "trainer.compile",
    "trainer.progress",
    "trainer.log_every",
    "trainer.tensorboard",
    "trainer.trackers",
    "trainer.checkpoint_every",
)

#: the dotted key whose null means the dataset's own evaluation transform (module docstring)
OWN_EVAL_TRANSFORM = "data.eval_transform"


def config_differences(
    saved: Mapping[str, Any], new: Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """``{dotted key: (saved value, new value)}`` for every key whose value differs as YAML
    writes them (keys by :func:`gspdml.dotted_keys.dotted_keys`: an empty mapping is a value, a
    list one value; a missing key reads as ``<absent>``; module docstring)."""
    old = dotted_keys(yaml.safe_load(dump_config(saved)))
    now = dotted_keys(yaml.safe_load(dump_config(new)))
    recorded = {k: v for k, v in old.items() if k.startswith(f"{OWN_EVAL_TRANSFORM}.")}
    if recorded and OWN_EVAL_TRANSFORM in now and now[OWN_EVAL_TRANSFORM] is None:
        del now[OWN_EVAL_TRANSFORM]  # null: the recorded one
        now.update(recorded)
    defaults = dotted_keys(yaml.safe_load(dump_config(DEFAULTS)))
    absent = "<absent>"
    for key in set(now) - set(old):
        if key in defaults and now[key] == defaults[key]:
            old[key] = now[key]
    return {
        key: (old.get(key, absent), now.get(key, absent))
        for key in sorted(set(old) | set(now))
        if old.get(key, absent) != now.get(key, absent)
    }


def check_resume_config(
    saved: Mapping[str, Any], new: Mapping[str, Any], allow_changes: bool
) -> dict[str, tuple[Any, Any]]:
    """Raise :class:`ConfigError` unless ``new`` equals ``saved``, or differs only in
    :data:`HARMLESS` keys and ``allow_changes``; returns the differences that were accepted."""
    changes = config_differences(saved, new)
    if not changes:
        return changes
    listing = "; ".join(f"{key}: {old!r} -> {value!r}" for key, (old, value) in changes.items())
    harmful = [key for key in changes if key not in HARMLESS]
    if harmful:
        raise ConfigError(
            "--resume",
            f"the config differs from the run's config.yaml in {listing}; resume with the "
            f"saved config (gspdml train RUN_DIR/config.yaml --resume), or start a new run "
            f"(another name). {', '.join(harmful)} change(s) what the weights become",
        )
    if not allow_changes:
        raise ConfigError(
            "--resume",
            f"the config differs from the run's config.yaml in {listing}; these keys do not "
            f"change the weights: pass --allow-changes to resume with them",
        )
    return changes
