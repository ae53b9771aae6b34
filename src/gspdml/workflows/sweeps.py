"""The statistic a family of runs over seeds is reported with: mean +- sample std (the GSP paper's
hyper-parameter studies, GSP paper Fig. 6 and Fig. 8, and every experiment script; the runs
themselves are trained by :mod:`gspdml.workflows.runner`). The one helper is
:func:`gspdml.evaluation.statistics.mean_std`, which the protocols use too."""

from gspdml.evaluation.statistics import mean_std

__all__ = ["mean_std"]
