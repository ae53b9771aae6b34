"""The GPU tests share the training tests' private dataset cache and tiny run config."""

from tests.training.conftest import _private_cache, make_config  # noqa: F401  (fixtures)
