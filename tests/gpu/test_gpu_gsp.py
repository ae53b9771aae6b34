"""The GSP layer on CUDA (torch code; the C kernels take CPU float32 only) equals the CPU layer.

Tolerances, relative to the largest entry of each output: float64 1e-10 (both devices run the
same operations; reductions sum in another order); float32 1e-4 (the CPU runs the C kernels,
measured 8e-7 from the torch code on the CPU, and the solver may stop a few iterations apart);
bf16 autocast 3e-2 against float32 on the same device (the backward's products with the
features run in bf16: measured 6e-3 on the CPU).
"""

import pytest
import torch

from gspdml.pooling import GSP
from tests.helpers.cuda import CUDA, full_float32

pytestmark = CUDA


def gsp_outputs(device, dtype, training=True, autocast=False, backward="closed_form"):
    """(vector, weights, attributes, d loss / d features, d loss / d prototypes) of one GSP layer
    on random features, built in float64 on the CPU so that every device and dtype starts alike."""
    torch.manual_seed(0)  # the prototypes' initialisation
    generator = torch.Generator().manual_seed(0)
    local = (
        torch.randn(4, 32, 7, 7, dtype=torch.float64, generator=generator)
        .to(device, dtype)
        .requires_grad_()
    )
    target = torch.randn(4, 32, dtype=torch.float64, generator=generator).to(device, dtype)
    layer = GSP(
        32, num_prototypes=8, mu=0.3, eps=5.0, iters=100, init="random", backward=backward
    ).double()
    layer = layer.to(device, dtype).train(training)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
        out = layer(local.to(torch.bfloat16) if autocast else local)
    if not training:
        return [out.vector, out.weights, out.attributes]
    ((out.vector * target).sum() + out.attributes.pow(2).sum()).backward()
    return [out.vector, out.weights, out.attributes, local.grad, layer.prototypes.grad]


def assert_close_to_max(got, want, tolerance):
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        scale = b.detach().abs().max().double().cpu()
        error = (a.detach().double().cpu() - b.detach().double().cpu()).abs().max()
        assert error <= tolerance * scale, (
            f"max error {float(error):.3g} above {tolerance} x {float(scale):.3g}"
        )


@pytest.mark.parametrize("backward", ["closed_form", "unrolled"])
@pytest.mark.parametrize("dtype,tolerance", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_forward_and_backward_on_cuda_equal_the_cpu(dtype, tolerance, backward):
    with full_float32():
        cuda = gsp_outputs(torch.device("cuda"), dtype, backward=backward)
    assert all(t.device.type == "cuda" for t in cuda)
    assert_close_to_max(cuda, gsp_outputs(torch.device("cpu"), dtype, backward=backward), tolerance)


def test_inference_on_cuda_equals_the_cpu():
    with torch.no_grad(), full_float32():
        cuda = gsp_outputs(torch.device("cuda"), torch.float32, training=False)
    with torch.no_grad():
        cpu = gsp_outputs(torch.device("cpu"), torch.float32, training=False)
    assert_close_to_max(cuda, cpu, 1e-4)


def test_bf16_autocast_on_cuda_keeps_the_transport_in_float32():
    device = torch.device("cuda")
    with full_float32():
        reference = gsp_outputs(device, torch.float32)
    mixed = gsp_outputs(device, torch.float32, autocast=True)
    assert all(torch.isfinite(t).all() for t in mixed)
    assert_close_to_max(mixed, reference, 3e-2)
