"""The LIBC objective (gspdml.losses.libc) against its formula written out by hand: label-smoothed
cross-entropy at temperature T of a classifier on the unnormalised backbone vectors plus one on the
batch-normalised MPN output; batch permutations; float64 gradients; bad options."""

import pytest
import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.losses import build_loss
from gspdml.models.output import EmbedderOutput


def smoothed_ce(logits, labels, eps):
    """-(1 - eps) log p_y - (eps / C) sum_c log p_c, averaged over the batch."""
    log_p = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    classes = logits.shape[1]
    picked = log_p[torch.arange(len(labels)), labels]
    return (-(1 - eps) * picked - eps / classes * log_p.sum(dim=1)).mean()


def batch_norm(x, norm):
    """Training-mode BatchNorm1d: the batch's mean and biased variance."""
    mean, var = x.mean(dim=0), x.var(dim=0, unbiased=False)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def libc(dim=8, classes=5, **options):
    loss = build_loss(
        {"libc": {"dropout": 0.0, **options}}, embedding_dim=dim, num_classes=classes
    ).double()
    with torch.no_grad():  # a non-trivial BatchNorm scale (its shift stays frozen at 0)
        loss.mpn_norm.weight.uniform_(0.5, 1.5)
        loss.mpn_classifier.weight.normal_(0, 0.3)
    return loss


def batch(n=12, dim=8, classes=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    pooled = torch.randn(n, dim, generator=gen, dtype=torch.float64) * 3
    labels = torch.arange(n) % classes
    return pooled, F.normalize(pooled, dim=1), labels


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"num_layers": 2, "num_heads": 4, "concat_layers": True, "temperature": 1 / 9},
        {"temperature": 0.6, "label_smoothing": 0.0, "backbone_weight": 0.5, "mpn_weight": 2.0},
    ],
)
def test_loss_matches_its_formula(options):
    loss = libc(**options)
    pooled, embeddings, labels = batch()
    got = loss(embeddings, labels, EmbedderOutput(embeddings, pooled=pooled))

    t, eps = loss.temperature, loss.label_smoothing
    outputs = loss.mpn(embeddings)  # the network itself is checked in tests/models
    refined = torch.cat(outputs, dim=1) if loss.concat_layers else outputs[-1]
    bb_logits = pooled @ loss.backbone_classifier.weight.T + loss.backbone_classifier.bias
    mpn_logits = batch_norm(refined, loss.mpn_norm) @ loss.mpn_classifier.weight.T
    expected = loss.backbone_weight * smoothed_ce(
        bb_logits / t, labels, eps
    ) + loss.mpn_weight * smoothed_ce(mpn_logits / t, labels, eps)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_without_an_output_the_backbone_classifier_reads_the_embeddings():
    loss = libc()
    pooled, embeddings, labels = batch()
    with_pooled = loss(embeddings, labels, EmbedderOutput(embeddings, pooled=pooled))
    assert loss(embeddings, labels) != with_pooled
    torch.testing.assert_close(
        loss(embeddings, labels),
        loss(embeddings, labels, EmbedderOutput(embeddings, pooled=embeddings)),
    )


def test_loss_is_invariant_to_the_order_of_the_batch():
    loss = libc(num_layers=2, num_heads=2)
    pooled, embeddings, labels = batch(seed=1)
    perm = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    a = loss(embeddings, labels, EmbedderOutput(embeddings, pooled=pooled))
    b = loss(embeddings[perm], labels[perm], EmbedderOutput(embeddings[perm], pooled=pooled[perm]))
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_gradients_match_finite_differences():
    loss = libc(dim=4, classes=3, num_heads=2)
    pooled, embeddings, labels = batch(n=6, dim=4, classes=3)

    def objective(x, f):
        return loss(x, labels, EmbedderOutput(x, pooled=f))

    assert torch.autograd.gradcheck(
        objective, (embeddings.requires_grad_(True), pooled.requires_grad_(True))
    )


def test_owns_trainable_parameters_but_not_the_batchnorm_shift():
    loss = libc()
    names = {name for name, p in loss.named_parameters() if p.requires_grad}
    assert "mpn_norm.bias" not in names
    assert {"backbone_classifier.weight", "mpn_classifier.weight", "mpn.input.weight"} <= names


@pytest.mark.parametrize(
    "options,field",
    [
        ({"num_heads": 3}, "loss.num_heads"),
        ({"num_layers": 0}, "loss.num_layers"),
        ({"temperature": 0.0}, "loss.temperature"),
        ({"label_smoothing": 1.0}, "loss.label_smoothing"),
    ],
)
def test_bad_options_name_their_field(options, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        build_loss({"libc": options}, embedding_dim=8, num_classes=5)
