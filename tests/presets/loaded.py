"""Each shipped preset loaded and checked once per test process (and working directory), for the
per-preset tests that only read it: a :class:`~gspdml.config.RunConfig` is frozen, and its
readers take copies (``to_dict``) before changing anything."""

import functools
import os

from gspdml.config import RunConfig, load_config


def preset(name: str) -> RunConfig:
    """The checked preset ``name`` (``cub-fair-c2-gsp``), loaded at most once here."""
    return _loaded(name, os.getcwd())


@functools.cache
def _loaded(name: str, cwd: str) -> RunConfig:
    return load_config(name)
