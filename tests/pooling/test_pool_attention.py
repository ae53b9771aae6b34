"""Attention poolings of the SimPool chapter (SOLAR, slot attention, class attention) against
slow references and their defining properties."""

import math

import torch

from gspdml.pooling import build_pooling


def built(spec, channels, seed=0):
    torch.manual_seed(seed)
    return build_pooling(spec, in_channels=channels).double().eval()


def test_solar_is_gem_of_the_non_local_enhanced_map():
    pool = built({"solar": {"reduction": 2}}, 4)
    x = torch.randn(2, 4, 2, 3, dtype=torch.float64)
    with torch.no_grad():
        out = pool(x)
        for i in range(2):
            feats = x[i].flatten(1).T  # [n, C]
            q, k, v = torch.relu(pool.query(feats)), torch.relu(pool.key(feats)), pool.value(feats)
            scores = torch.tensor(
                [[float(q[a] @ k[b]) / math.sqrt(2) for b in range(6)] for a in range(6)],
                dtype=torch.float64,
            )
            A = torch.exp(scores) / torch.exp(scores).sum(dim=1, keepdim=True)
            enhanced = feats + pool.out(A @ v)
            p = pool.p
            expected = enhanced.clamp_min(1e-6).pow(p).mean(dim=0).pow(1 / p)
            torch.testing.assert_close(out.vector[i], expected)
            torch.testing.assert_close(out.weights[i].flatten(), A.mean(dim=0))


def test_slot_attention_normalises_over_locations_and_slots_compete():
    pool = built({"slot": {"slots": 2, "iters": 1}}, 8)
    x = torch.randn(1, 8, 3, 3, dtype=torch.float64)
    with torch.no_grad():
        out = pool(x)
        tokens = x.flatten(2).transpose(1, 2)[0]
        inputs = pool.norm_input(tokens)
        k, v = pool.wk(inputs), pool.wv(inputs)
        slots = pool.initial
        q = pool.wq(pool.norm_slots(slots))
        logits = k @ q.T / math.sqrt(8)
        A = (
            torch.softmax(logits, dim=1) + 1e-8
        )  # softmax over slots (Locatello et al.; not Eq. 3.29's axis)
        A = A / A.sum(dim=0, keepdim=True)  # then normalised over locations
        updated = pool.gru(A.T @ v, slots)
        updated = updated + pool.mlp(pool.norm_mlp(updated))
    torch.testing.assert_close(out.vector[0], updated.amax(dim=0))
    torch.testing.assert_close(out.weights[0].flatten(), A.mean(dim=1))


def test_class_attention_matches_a_per_head_reference():
    pool = built({"class_attention": {"heads": 2, "layer_scale_init": 0.5}}, 4)
    x = torch.randn(1, 5, 4, dtype=torch.float64)  # ViT tokens
    block = pool.blocks[0]
    with torch.no_grad():
        out = pool(x)
        cls = pool.cls[0]
        z = block.norm1(torch.cat([cls, x[0]]))
        q, k, v = block.wq(z[0]), block.wk(z), block.wv(z)
        heads, attention = [], []
        for h in range(2):
            sl = slice(2 * h, 2 * h + 2)
            a = torch.softmax(k[:, sl] @ q[sl] / math.sqrt(2), dim=0)
            heads.append(a @ v[:, sl])
            attention.append(a[1:])
        new = cls[0] + 0.5 * block.proj(torch.cat(heads))
        new = new + 0.5 * block.mlp(block.norm2(new))
        expected_weights = torch.stack(attention).mean(dim=0)
    torch.testing.assert_close(out.vector[0], pool.norm(new))
    torch.testing.assert_close(out.weights[0], expected_weights / expected_weights.sum())


def test_class_attention_with_zero_layer_scale_is_the_normalised_class_token():
    pool = built({"class_attention": {"layer_scale_init": 0.0}}, 8)
    out = pool(torch.randn(3, 8, 2, 2, dtype=torch.float64)).vector
    torch.testing.assert_close(out, pool.norm(pool.cls[0]).expand(3, -1))
