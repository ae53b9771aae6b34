"""ZSR in a float64 model: the ridge solve and the logits run in the wider dtype of the
attributes and the class embeddings (at least float32). Before, the attributes were cast to
float32 while the class embeddings of a float64 loss stayed float64, and the ridge solve failed
with "expected m1 and m2 to have the same dtype"; a float32 loss given float64 attributes (a
float64 pooling ahead of it) solved in float32."""

from __future__ import annotations

import pytest
import torch

from gspdml.models.output import EmbedderOutput
from tests.losses.test_loss_zsr import batch, make_zsr, reference_zs


@pytest.mark.parametrize("reduction", ["mean", "sum_of_halves"])
def test_a_float64_zsr_equals_algorithm_4_to_float64_precision(reduction):
    loss = make_zsr(logit_scale=9.5, mixing=0.1, reduction=reduction).double()
    emb, labels, z = (t.double() if t.is_floating_point() else t for t in batch())
    got = loss(emb, labels, EmbedderOutput(emb, attributes=z))
    assert got.dtype == torch.float64
    expected = 0.9 * loss.base(emb, labels) + 0.1 * reference_zs(loss, z, labels, 9.5, reduction)
    # float32 anywhere in the chain would leave errors near 1e-7 of the loss
    torch.testing.assert_close(got, expected, rtol=1e-11, atol=1e-12)


def test_float64_attributes_of_a_float32_loss_are_solved_in_float64():
    loss = make_zsr(logit_scale=9.5)
    emb, labels, z = batch()
    zs = loss.zero_shot_loss(z.double(), labels)
    assert zs.dtype == torch.float64
    expected = reference_zs(loss, z.double(), labels, 9.5, "mean")
    torch.testing.assert_close(zs, expected, rtol=1e-11, atol=1e-12)


def test_gradients_of_a_float64_zsr_pass_gradcheck():
    """The closed-form ridge solve is differentiable: torch's finite differences, possible in
    float64 only, agree with autograd in the attributes and the class embeddings."""
    loss = make_zsr(logit_scale=1.0).double().eval()
    emb, labels, z = batch()
    emb = emb.double()

    def zsr(attributes, class_embeddings):
        output = EmbedderOutput(emb, attributes=attributes)
        parameters = {"class_embeddings": class_embeddings}
        return torch.func.functional_call(loss, parameters, (emb, labels, output), strict=False)

    inputs = (z.double(), loss.class_embeddings.detach().clone())
    assert torch.autograd.gradcheck(zsr, tuple(t.requires_grad_(True) for t in inputs))
