"""The GPU tests share the training tests' tiny run config (and the suite's private dataset cache)."""

from tests.training.conftest import make_config  # noqa: F401  (fixture)
