"""The parameter and multiply-add counts of Psomas thesis Table 3.10's classifiers
(gspdml.models.resources), against the printed parameters and an independent count."""

import torch
from torch import nn

from gspdml.models.resources import count_resources, imagenet_classifier

#: Psomas thesis Table 3.10, #params (M) as printed: (network, pooling) -> millions
PRINTED_PARAMS = {
    ("resnet18", "gap"): 11.7,
    ("resnet18", "simpool"): 12.2,
    ("resnet50", "gap"): 25.6,
    ("resnet50", "simpool"): 33.9,
}


def _layer_multiply_adds(model: nn.Module, size: int = 224) -> int:
    """The multiply-adds of every convolution and linear layer, from their output shapes
    (forward hooks): ``out.numel() x in_channels / groups x kernel area`` and ``in x out``."""
    total = 0

    def conv(module: nn.Conv2d, _, output: torch.Tensor) -> None:
        nonlocal total
        kernel = module.kernel_size[0] * module.kernel_size[1]
        total += output.numel() * module.in_channels // module.groups * kernel

    def linear(module: nn.Linear, inputs, output: torch.Tensor) -> None:
        nonlocal total
        total += output.numel() * module.in_features

    handles = [
        m.register_forward_hook(conv if isinstance(m, nn.Conv2d) else linear)
        for m in model.modules()
        if isinstance(m, (nn.Conv2d, nn.Linear))
    ]
    with torch.no_grad():
        model.eval()(torch.zeros(1, 3, size, size))
    for handle in handles:
        handle.remove()
    return total


def test_the_parameters_are_the_printed_ones():
    for (network, pooling), millions in PRINTED_PARAMS.items():
        model = imagenet_classifier(network, pooling)
        counted = sum(p.numel() for p in model.parameters())
        assert round(counted / 1e6, 1) == millions, (network, pooling, counted)


def test_multiply_adds_are_those_of_the_layers_and_simpool_adds_its_products():
    """GAP: the convolutions and the classifier; SimPool on p = 7 x 7 locations of d = 512
    channels adds W_Q u0 (d^2), W_K LN(X) (p d^2) and the logits K^T q (p d); its weighted
    f_alpha mean is elementwise."""
    gap, simpool = (
        imagenet_classifier("resnet18", "gap"),
        imagenet_classifier("resnet18", "simpool"),
    )
    counted = count_resources(gap)
    assert counted.macs == _layer_multiply_adds(gap)
    p, d = 49, 512
    assert count_resources(simpool).macs - counted.macs == d * d + p * d * d + p * d
    assert count_resources(simpool).macs == _layer_multiply_adds(simpool) + p * d
