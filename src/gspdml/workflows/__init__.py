"""gspdml.workflows: everything that trains and compares *several* runs, above the single run of
:mod:`gspdml.training`.

- :mod:`~gspdml.workflows.runner`: the one runner over configs × seeds and its one rule for
  reusing, resuming or refusing a run directory;
- :mod:`~gspdml.workflows.tables`: the one Markdown/JSON table writer;
- :mod:`~gspdml.workflows.protocol`: the evaluation protocols (fair, tuning, conventional,
  two_stage) over folds and seeds;
- :mod:`~gspdml.workflows.sweeps`: the mean +- sample std a family of runs over seeds is
  reported with;
- :mod:`~gspdml.workflows.demo`: the main job, ``gspdml demo``.

The experiment scripts (``experiments/*/run.py``, ``experiments/common.py``) train through the
same runner.
"""
