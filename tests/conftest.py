"""Suite-wide setup.

The ``numerics`` marker: the tests whose assertions compare floating-point results of
different kernels, precisions or summation orders. ``make test`` runs them a second time under
``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``, as a CPU without AVX-512 or bf16 units
computes them, so a tolerance that holds only on one CPU's rounding fails on any machine.

The dataset cache: every test process (each pytest-xdist worker, ``make test`` runs two) builds
its generated datasets in its own ``$GSPDML_CACHE`` under its pytest temporary folder, never in
``~/.cache/gspdml``: a test neither reads what an older version of the code left there nor
writes where another process or the user's runs read."""

from pathlib import Path

import pytest

#: the numerically sensitive modules and folders, relative to tests/ (``make test`` passes them
#: to its second run, which then collects only these)
NUMERICS = (
    "compat/test_compat_hardware.py",
    "pooling/gsp/",
    "pooling/test_pool_registry.py",
    "evaluation/test_eval_exact_knn.py",
    "evaluation/test_eval_exact_knn_paths.py",
    "evaluation/test_eval_exact_knn_ties.py",
    "losses/test_loss_xml.py",
    "losses/test_loss_zsr.py",
    "models/test_feature_cache.py",
    "parity/test_proxynca_step.py",
    "training/test_dist_equivalence.py",
)
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        relative = Path(item.fspath).resolve().relative_to(TESTS).as_posix()
        if relative.startswith(NUMERICS):
            item.add_marker(pytest.mark.numerics)


@pytest.fixture(scope="session", autouse=True)
def _private_dataset_cache(tmp_path_factory):
    """``$GSPDML_CACHE`` of this test process (session scope: module fixtures build data too);
    a test of the cache itself sets its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GSPDML_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
        yield
