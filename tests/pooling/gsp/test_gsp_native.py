"""The C kernels of the GSP transport (gspdml/pooling/gsp/native) against the torch code they replace."""

import warnings

import pytest
import torch

from gspdml.pooling.gsp import native, transport
from gspdml.pooling.gsp.fused import fused_gsp


@pytest.fixture
def torch_only(monkeypatch):
    """Run the torch code paths: as if no compiler were there."""

    def use(enabled: bool):
        monkeypatch.setattr(native, "library", native.library if enabled else (lambda: None))

    return use


def test_the_kernels_build_wherever_a_compiler_is_found():
    assert native.library() is not None or native.find_compiler() is None


def test_disabled_or_failed_builds_fall_back_with_a_warning_only_for_failures(
    monkeypatch, tmp_path
):
    native.library.cache_clear()
    try:
        monkeypatch.setenv("GSPDML_NATIVE", "0")
        assert native.library() is None
        native.library.cache_clear()
        monkeypatch.setenv("GSPDML_NATIVE", "1")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        monkeypatch.setattr(native, "FLAGS", native.FLAGS + ("-fno-such-flag",))
        with pytest.warns(RuntimeWarning, match="did not build"):
            assert native.library() is None
    finally:
        native.library.cache_clear()


@pytest.mark.parametrize(
    "mu,eps,iters", [(0.3, 5.0, 100), (0.25, 10.0, 100), (0.7, 0.5, 7), (0.05, 30.0, 300)]
)
def test_solver_equals_the_torch_loop(mu, eps, iters, torch_only):
    """Same iteration, same stopping rule: the same (log rho, log t) up to float32 rounding (the
    kernels' exp2 and log are within a few ulp of torch's)."""
    g = torch.Generator().manual_seed(0)
    cost = torch.rand(16, 12, 49, generator=g) * 2.0
    results = []
    for enabled in (True, False):
        torch_only(enabled)
        results.append(transport.solve_log(cost, mu, eps, iters, stop_when_stationary=True))
    (native_rho, native_t), (torch_rho, torch_t) = results
    torch.testing.assert_close(native_t, torch_t, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(native_rho.exp(), torch_rho.exp(), rtol=1e-4, atol=1e-7)


def test_solver_hands_columns_below_the_floor_to_the_log_domain_code():
    cost = 1.0 + torch.rand(4, 8, 49)  # all >= 1 at eps = 200: log s_j < -200 < PLAIN_SUM_FLOOR
    assert transport.solve_log_native(cost, 0.3, 200.0, 100, True) is None
    rho, pi = transport.partial_transport(cost, 0.3, 200.0)
    assert torch.isfinite(rho).all() and torch.isfinite(pi).all()


@pytest.mark.parametrize("with_attributes", [False, True])
def test_fused_backward_equals_the_torch_code(with_attributes, torch_only):
    """Gradients of all three outputs (the attributes' gradient enters as G_pi) through the C
    backward and through the torch code, float32, clipped and unclipped norms."""
    g = torch.Generator().manual_seed(1)
    local = torch.randn(8, 24, 30, generator=g) * torch.linspace(0.02, 0.4, 30)
    prototypes = torch.randn(10, 24, generator=g) * 0.25
    prototypes[0] *= 8.0  # one prototype outside the unit ball
    upstream = [
        torch.randn(8, 24, generator=g),
        torch.randn(8, 30, generator=g),
        torch.randn(8, 10, generator=g),
    ]
    grads = []
    for enabled in (True, False):
        torch_only(enabled)
        x, w = local.clone().requires_grad_(), prototypes.clone().requires_grad_()
        outputs = fused_gsp(x, w, 0.3, 5.0, 100)
        used = outputs if with_attributes else outputs[:2]
        grads.append(
            torch.autograd.grad(sum((o * u).sum() for o, u in zip(used, upstream)), (x, w))
        )
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * float(b.abs().max()))


def test_kernels_are_not_used_where_autograd_records_or_for_other_dtypes():
    cost = torch.rand(2, 3, 5, requires_grad=True)
    assert not native.eligible(cost) and not native.eligible(cost.detach().double())
    assert not native.eligible(cost.detach().transpose(1, 2))
    with torch.no_grad():
        assert native.eligible(cost)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the unrolled path differentiates through torch code
        rho, _ = transport.partial_transport(cost, 0.3, 5.0, 50, backward="unrolled")
        rho.sum().backward()
    assert cost.grad is not None and torch.isfinite(cost.grad).all()
