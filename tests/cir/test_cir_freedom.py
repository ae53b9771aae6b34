"""FreeDom pieces checked by hand: voting and weights, proxies, composition, variants, vocabulary."""

import numpy as np
import pytest
import torch

from gspdml.cir.freedom import (
    FreeDom,
    TextLabels,
    TextMemory,
    compose,
    expanded_inversion,
    nearest,
    proxy_indices,
    read_vocabulary,
    vote,
)
from gspdml.errors import ConfigError, DataError


def basis(i, d=8):
    v = torch.zeros(d, dtype=torch.float64)
    v[i] = 1.0
    return v


class RecordingEncoder:
    """A deterministic text encoder (seeded per string) that records every string it embeds."""

    def __init__(self, d=8):
        self.d, self.seen = d, []

    def __call__(self, texts):
        self.seen.extend(texts)
        rows = [
            torch.randn(
                self.d,
                generator=torch.Generator().manual_seed(sum(map(ord, t)) * 7919 + len(t)),
                dtype=torch.float64,
            )
            for t in texts
        ]
        return torch.nn.functional.normalize(torch.stack(rows), dim=-1)


def test_vote_matches_the_code_example():
    # the test of github.com/NikosEfth/freedom: [['dog','wolf'],['dog','fox'],['cat','dog']], miu = 3
    words = ["dog", "wolf", "fox", "cat"]
    flat = torch.tensor([0, 1, 0, 2, 3, 0])
    chosen, weights = vote(flat, 3, "count_max")
    assert [words[i] for i in chosen] == ["dog", "wolf", "fox"]  # tie wolf/fox/cat: first seen
    assert weights == pytest.approx([1.0, 1 / 3, 1 / 3])
    assert vote(flat, 3, "count")[1] == [3.0, 1.0, 1.0]
    assert vote(flat, 3, "uniform")[1] == [1.0, 1.0, 1.0]
    assert [words[i] for i in vote(flat, 10)[0]] == [
        "dog",
        "wolf",
        "fox",
        "cat",
    ]  # fewer than m distinct


def test_nearest_orders_by_similarity_then_memory_order():
    memory = torch.stack([basis(0), basis(1), basis(0), basis(2)])
    query = (basis(0) * 0.8 + basis(2) * 0.6)[None]
    assert nearest(query, memory, 3).tolist() == [[0, 2, 3]]
    with pytest.raises(ConfigError, match="holds 4 items"):
        nearest(query, memory, 5)
    rng = np.random.default_rng(0)  # many ties, also at the cut-off
    memory = torch.from_numpy(rng.integers(-2, 3, (50, 4)).astype(np.float64))
    queries = torch.from_numpy(rng.integers(-2, 3, (30, 4)).astype(np.float64))
    for count in (1, 7, 50):
        want = np.argsort(-(queries @ memory.T).numpy(), axis=1, kind="stable")[:, :count]
        assert nearest(queries, memory, count).tolist() == want.tolist()
        assert (
            nearest(queries, memory, count, block_elements=120).tolist() == want.tolist()
        )  # 2 queries per block


def proxy_embeddings(
    queries: torch.Tensor, memory: torch.Tensor, k: int, query_as_proxy: str
) -> torch.Tensor:
    """The k proxy images of every query as embeddings ``[Q, k, D]`` (-1: the query itself)."""
    indices = proxy_indices(queries, memory, k, query_as_proxy)
    return torch.where((indices < 0)[..., None], queries[:, None], memory[indices.clamp(min=0)])


def test_proxy_rules():
    memory = torch.stack([basis(i) for i in range(4)])
    inside = basis(1)[None]
    outside = torch.nn.functional.normalize((basis(1) + 0.5 * basis(2))[None], dim=-1)
    # in memory: the query is its own first neighbour, nothing is prepended
    assert torch.equal(
        proxy_embeddings(inside, memory, 2, "auto"), torch.stack([basis(1), basis(0)])[None]
    )
    # not in memory (max similarity 0.894 < 0.98): prepend the query, drop the k-th neighbour
    got = proxy_embeddings(outside, memory, 2, "auto")
    assert torch.equal(got[0, 0], outside[0]) and torch.equal(got[0, 1], basis(1))
    assert torch.equal(
        proxy_embeddings(outside, memory, 2, "never")[0], torch.stack([basis(1), basis(2)])
    )
    # the code's batch rule: one outside query makes every query of the batch prepend itself
    both = torch.cat([inside, outside])
    batch = proxy_embeddings(both, memory, 2, "batch")
    assert torch.equal(batch[0], torch.stack([basis(1), basis(1)]))
    assert torch.equal(
        proxy_embeddings(both, memory, 2, "auto")[0], torch.stack([basis(1), basis(0)])
    )
    with pytest.raises(ConfigError, match="query_as_proxy: unknown rule 'sometimes'"):
        proxy_embeddings(inside, memory, 2, "sometimes")


def test_expanded_inversion_counts_words_of_the_proxies():
    # vocabulary: words along axes 0..5; visual memory: 3 images; the query is image 0.
    words = [f"w{i}" for i in range(6)]
    text = TextMemory(words, torch.stack([basis(i) for i in range(6)]))
    unit = lambda v: v / v.norm()
    images = torch.stack(
        [
            unit(3 * basis(0) + 2 * basis(1) + basis(6)),  # words by similarity: w0, w1
            unit(3 * basis(1) + 2 * basis(0) + basis(7)),  # w1, w0
            unit(3 * basis(2) + 2 * basis(1)),
        ]
    )  # w2, w1
    labels = expanded_inversion(images[:1], images, text, k=3, n=2, m=2, weighting="count_max")
    # proxies (by similarity to image 0): 0, 1, 2 -> words w0 w1 | w1 w0 | w2 w1 -> counts w1:3, w0:2, w2:1
    assert labels[0].words == ["w1", "w0"]
    assert labels[0].weights == pytest.approx([1.0, 2 / 3])
    labels = expanded_inversion(images[:1], images, text, k=2, n=2, m=3, weighting="count")
    assert labels[0].words == ["w0", "w1"] and labels[0].weights == [2.0, 2.0]  # tie: w0 seen first
    cache = {}
    cached = expanded_inversion(images, images, text, k=3, n=2, m=2, memory_words=cache)
    assert cache == {0: [0, 1], 1: [1, 0], 2: [2, 1]}  # each memory image's n words
    assert [entry.words for entry in cached] == [
        entry.words for entry in expanded_inversion(images, images, text, k=3, n=2, m=2)
    ]
    # a query outside the memory (best similarity 0.77 < 0.98) is its own first proxy:
    # proxies [query, image 2] -> words w2 w3 | w2 w1 -> counts w2:2, w3:1, w1:1
    outside = unit(basis(2) + 0.4 * basis(3))[None]
    labels = expanded_inversion(outside, images, text, k=2, n=2, m=3, weighting="count")
    assert labels[0].words == ["w2", "w3", "w1"] and labels[0].weights == [2.0, 1.0, 1.0]


def test_late_and_early_fusion_compose_word_domain_strings():
    encoder = RecordingEncoder()
    labels = [TextLabels(["shark", "fish"], [1.0, 0.5])]
    late = compose(labels, ["cartoon"], encoder, "late")
    want = encoder(["shark cartoon"])[0] + 0.5 * encoder(["fish cartoon"])[0]
    torch.testing.assert_close(late[0], want)  # Eq. 4.12, not renormalised
    renormalised = compose(labels, ["cartoon"], encoder, "late", renormalize=True)
    torch.testing.assert_close(renormalised[0], want / want.norm())
    encoder.seen.clear()
    early = compose(labels, ["cartoon"], encoder, "early")
    assert encoder.seen == ["shark fish cartoon"]  # Eq. 4.10
    torch.testing.assert_close(early[0], encoder(["shark fish cartoon"])[0])


def test_freedom_scores_and_variants():
    encoder = RecordingEncoder()
    words = [f"w{i}" for i in range(6)]
    text = TextMemory(words, encoder(words))
    database = torch.nn.functional.normalize(
        torch.randn(10, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64), dim=-1
    )
    queries = database[[2, 2, 5]]
    targets = ["sketch", "photo", "sketch"]
    freedom = FreeDom(encoder, text, database, k=4, n=3, m=2)
    labels = expanded_inversion(database[[2, 5]], database, text, k=4, n=3, m=2)
    want = compose([labels[0], labels[0], labels[1]], targets, encoder) @ database.T
    torch.testing.assert_close(freedom.scores(queries, targets, database), want)
    encoder.seen.clear()
    freedom.scores(queries, targets, database)
    assert encoder.seen == []  # composed texts are memoised
    single = FreeDom.variant("single", encoder, text)
    first_word = words[nearest(database[[2]], text.embeddings, 1)[0, 0]]
    torch.testing.assert_close(
        single.query_embeddings(database[[2]], ["sketch"])[0], encoder([f"{first_word} sketch"])[0]
    )
    full = FreeDom.variant("L+a", encoder, text, database, k=4, n=3, m=2).invert(database[[5]])[0]
    uniform = FreeDom.variant("L+", encoder, text, database, k=4, n=3, m=2).invert(database[[5]])[0]
    assert (
        uniform.words == full.words and uniform.weights == [1.0, 1.0] and max(full.weights) == 1.0
    )
    encoder.seen.clear()
    FreeDom.variant("E+", encoder, text, database, k=4, n=3, m=2).query_embeddings(
        database[[5]], ["toy"]
    )
    assert encoder.seen == [" ".join(full.words + ["toy"])]
    plain = FreeDom.variant("L", encoder, text, m=3).invert(database[[5]])[0]
    assert (
        plain.words == [words[i] for i in nearest(database[[5]], text.embeddings, 3)[0]]
        and plain.weights == [1.0] * 3
    )
    with pytest.raises(ConfigError, match="unknown FreeDom variant"):
        FreeDom.variant("X", encoder, text)
    with pytest.raises(ConfigError, match="visual_memory"):
        FreeDom(encoder, text, None)
    with pytest.raises(ConfigError, match="m: must be >= 1"):
        FreeDom(encoder, text, database, m=0)


def test_read_vocabulary(tmp_path):
    (tmp_path / "words.txt").write_text("cat\n\n  dog \ncat\nhot dog\n")
    assert read_vocabulary(tmp_path / "words.txt") == ["cat", "dog", "hot dog"]
    (tmp_path / "oi.csv").write_text(
        'LabelName,DisplayName\n/m/01,Tortoise\n/m/02,"Container, shipping"\n'
    )
    assert read_vocabulary(tmp_path / "oi.csv") == ["Tortoise", "Container, shipping"]
    (tmp_path / "plain.csv").write_text("'Nduja\n10 cane\n")
    assert read_vocabulary(tmp_path / "plain.csv") == ["'Nduja", "10 cane"]
    with pytest.raises(DataError, match="vocabulary file not found"):
        read_vocabulary(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("\n \n")
    with pytest.raises(DataError, match="empty"):
        read_vocabulary(tmp_path / "empty.txt")
