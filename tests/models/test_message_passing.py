"""The message passing network of LIBC against a per-node loop written from the paper's equations
and the release's soft-max, ``exp(s_ij) / (1 + sum_j exp(s_ij))`` (torch_geometric's ``softmax``
with margin 0, in the release's ``net/utils.py``; gspdml.models.message_passing): one attention
sum per receiver and head, then the residuals,
layer norms and MLP; permutation equivariance; float64 gradients by finite differences."""

import math

import pytest
import torch

from gspdml.models.message_passing import MessagePassingLayer, MessagePassingNetwork


def linear(layer, x):
    return layer.weight @ x + layer.bias


def layer_norm(norm, x):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    return (x - mean) / math.sqrt(var + norm.eps) * norm.weight + norm.bias


def reference_layer(layer, xs):
    """The layer on a list of node vectors, one receiver and one head at a time."""
    att, heads = layer.attention, layer.attention.num_heads
    width = xs[0].shape[0] // heads
    q = [linear(att.query, x) for x in xs]
    k = [linear(att.key, x) for x in xs]
    v = [linear(att.value, x) for x in xs]
    out = []
    for i in range(len(xs)):
        message = []
        for h in range(heads):
            part = slice(h * width, (h + 1) * width)
            scores = [float(q[i][part] @ k[j][part]) / math.sqrt(width) for j in range(len(xs))]
            top = max(max(scores), 0.0)  # the release's soft-max: a null sender of score 0
            exps = [math.exp(s - top) for s in scores]
            total = sum(exps) + math.exp(-top)
            message.append(sum(e / total * v[j][part] for j, e in enumerate(exps)))
        m = linear(att.out, torch.cat(message))
        x1 = layer_norm(layer.norm1, xs[i] + m)
        hidden = torch.clamp(linear(layer.mlp[0], x1), min=0)
        out.append(layer_norm(layer.norm2, x1 + linear(layer.mlp[3], hidden)))
    return torch.stack(out)


def randomised(module, seed):
    """``module`` in float64 with every parameter random (LayerNorm affine too), in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    module = module.double().eval()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5)
    return module


@pytest.mark.parametrize("dim,heads,nodes", [(12, 3, 7), (8, 1, 5), (8, 8, 4)])
def test_layer_matches_a_per_node_loop(dim, heads, nodes):
    layer = randomised(MessagePassingLayer(dim, heads), seed=dim + heads)
    x = torch.randn(nodes, dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        got = layer(x)
        expected = reference_layer(layer, list(x))
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


def test_network_is_permutation_equivariant_over_the_batch():
    net = randomised(MessagePassingNetwork(12, num_layers=2, num_heads=4), seed=5)
    x = torch.randn(9, 12, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        outputs, permuted = net(x), net(x[perm])
    for a, b in zip(outputs, permuted):
        torch.testing.assert_close(b, a[perm], rtol=1e-12, atol=1e-12)
    # and a node's output depends on the other nodes (messages pass)
    with torch.no_grad():
        alone = net(x[:1])[-1][0]
    assert (alone - outputs[-1][0]).abs().max() > 1e-3


def test_dropout_acts_only_in_training():
    net = MessagePassingNetwork(8, num_layers=1, num_heads=2, dropout=0.5).double()
    x = torch.randn(6, 8, dtype=torch.float64)
    torch.manual_seed(0)
    first = net(x)[-1]
    torch.manual_seed(1)
    assert not torch.allclose(first, net(x)[-1])
    net.eval()
    torch.testing.assert_close(net(x)[-1], net(x)[-1], rtol=0, atol=0)


def test_layer_gradients_match_finite_differences():
    layer = randomised(MessagePassingLayer(4, 2), seed=7)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert torch.autograd.gradcheck(layer, (x.requires_grad_(True),))
    weight = layer.attention.query.weight

    def of_query_weight(w):
        return torch.func.functional_call(layer, {"attention.query.weight": w}, (x.detach(),))

    assert torch.autograd.gradcheck(of_query_weight, (weight.detach().clone().requires_grad_(),))


def test_width_must_divide_into_heads():
    with pytest.raises(ValueError, match="not divisible by 3 heads"):
        MessagePassingLayer(8, 3)
