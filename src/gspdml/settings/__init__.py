"""The typed run schema: the sections of a run config as frozen dataclasses.

It sits below every package that reads a run's settings (``data``, ``models``, ``losses``,
``evaluation``, ``training``), so they take typed sections (:class:`~gspdml.settings.sections.
EvaluationConfig`, ...) rather than reading mappings by string key. :mod:`gspdml.config` loads a
YAML file or preset into a :class:`~gspdml.settings.sections.RunConfig` and checks the components
against the registries.
"""
