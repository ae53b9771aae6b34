"""gspdml.workflows.sweeps: the sample std over seeds."""

import numpy as np
import pytest

from gspdml.workflows.sweeps import mean_std


def test_mean_std_is_the_sample_std():
    values = [0.2, 0.5, 0.9]
    assert mean_std(values) == pytest.approx(
        {"mean": np.mean(values), "std": np.std(values, ddof=1)}
    )
    assert mean_std([0.4]) == {"mean": 0.4, "std": 0.0}
    with pytest.raises(ValueError, match="at least one value"):
        mean_std([])
