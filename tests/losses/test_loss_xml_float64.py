"""XML in a float64 model: the soft histograms (XML paper Eq. 2.4), the ridge solve across the
halves (Eq. 2.8) and the base loss of the predictions (Eq. 2.10) run in the widest dtype of the
local features, the pooled vectors and the prototypes, at least float32. Before, all of it was
cast to float32, so a float64 model's XML term carried float32 rounding (errors near 1e-7 of the
loss) and its gradients were float32 ones."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gspdml.models.output import EmbedderOutput
from tests.losses.test_loss_xml import batch, make_xml, reference_xml


def _float64(*tensors):
    return (t.double() if t.is_floating_point() else t for t in tensors)


def test_a_float64_xml_equals_eq_2_4_to_2_11_in_float64():
    loss = make_xml(mixing=0.2).double()
    local, pooled, emb, labels = _float64(*batch())
    got = loss(emb, labels, EmbedderOutput(emb, local=local, pooled=pooled))
    assert got.dtype == torch.float64
    xml = reference_xml(loss, local, pooled, labels, base_dtype=torch.float64)
    expected = 0.8 * loss.base(emb, labels) + 0.2 * xml
    # float32 anywhere in the chain would leave errors near 1e-7 of the loss
    torch.testing.assert_close(got, expected, rtol=1e-11, atol=1e-12)


def test_float64_features_of_a_float32_xml_are_solved_in_float64():
    loss = make_xml()
    local, pooled, _, labels = _float64(*batch())
    got = loss.cross_batch_loss(local, pooled, labels)
    assert got.dtype == torch.float64
    expected = reference_xml(loss, local, pooled, labels, base_dtype=torch.float64)
    torch.testing.assert_close(got, expected, rtol=1e-11, atol=1e-12)


def test_gradients_of_a_float64_xml_pass_gradcheck():
    """Torch's finite differences, possible in float64 only, agree with autograd in the local
    features (through the histograms and the pooled vectors) and the prototypes."""
    loss = make_xml(mixing=1.0).double()
    local, _, _, labels = batch()
    local = local[:, :, :1, :2].double()  # 144 entries: a quick check

    def xml(features, prototypes):
        pooled = features.mean((2, 3))
        emb = F.normalize(pooled, dim=1)
        output = EmbedderOutput(emb, local=features, pooled=pooled)
        parameters = {"prototypes": prototypes}
        return torch.func.functional_call(loss, parameters, (emb, labels, output), strict=False)

    inputs = (local, loss.prototypes.detach().clone())
    assert torch.autograd.gradcheck(xml, tuple(t.requires_grad_(True) for t in inputs))
