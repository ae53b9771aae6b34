"""FreeDom's oracle (Psomas thesis §4.4.7, Table 4.6; gspdml.cir.oracle): the query's class or
source-domain name added to its text labels. The evaluation is checked against the composition
written out here (the labels of FreeDom's inversion plus the oracle word, the text encoder, the
ranking and the trapezoid AP in plain loops), and its ``map_change`` against a second evaluation
without the oracle."""

import numpy as np
import pytest

from gspdml.cir.domain_datasets import domain_dataset_protocol
from gspdml.cir.evaluation import CirMethod, evaluate_cir
from gspdml.cir.features import encode_image_files, encode_texts
from gspdml.cir.freedom import FreeDom, TextLabels, TextMemory, read_vocabulary
from gspdml.cir.generic_datasets import generic_protocol
from gspdml.cir.oracle import oracle_words, with_oracle
from gspdml.errors import ConfigError, DataError
from tests.helpers.cir_tiny_clip import build
from tests.helpers.freedom_release import LAYOUTS, write_release_tree
from tests.helpers.generic_cir_release import write_cirr

WORDS = ["cat", "dog", "tiger", "wolf", "fish", "car", "tree", "house", "boat", "bridge"]


@pytest.fixture
def ltll(tmp_path, monkeypatch):
    """An LTLL tree of 24 images (FreeDom's k = 20 proxies fit) and a vocabulary file."""
    labels, classes, _, queries = LAYOUTS["ltll"]
    monkeypatch.setitem(LAYOUTS, "ltll", (labels, ("Big_Ben", "Q302", "Taj_Mahal"), 4, queries))
    write_release_tree(tmp_path, "ltll")
    (tmp_path / "words.txt").write_text("\n".join(WORDS) + "\n")
    return tmp_path


def test_oracle_words_are_the_query_class_and_source_domain(ltll):
    protocol = domain_dataset_protocol("ltll", ltll)
    objects, domains = oracle_words(protocol, "object"), oracle_words(protocol, "domain")
    assert len(objects) == len(domains) == len(protocol.query_images) == 24
    for path, word, domain in zip(protocol.query_images, objects, domains):
        label, cls = path.split("/")[-3:-1]  # ltll/<domain>/<class>/<file>
        assert word == cls.replace("_", " ")
        assert domain == {"New": "Today", "Old": "Archive"}[label]
    labels = with_oracle([TextLabels(["a", "b"], [0.5, 1.0])], ["c"])
    assert (labels[0].words, labels[0].weights) == (["a", "b", "c"], [0.5, 1.0, 1.0])


def trapezoid_ap(scores, positives):
    order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
    ranks = [r for r, j in enumerate(order) if j in positives]
    return sum(
        ((1.0 if r == 0 else i / r) + (i + 1) / (r + 1)) / 2 / len(ranks)
        for i, r in enumerate(ranks)
    )


@pytest.mark.parametrize(("variant", "oracle"), [("L+", "object"), ("E+", "domain")])
def test_oracle_evaluation_equals_the_composition_written_out(ltll, variant, oracle):
    model = build()
    protocol = domain_dataset_protocol("ltll", ltll)
    vocabulary = ltll / "words.txt"
    method = CirMethod(variant=variant, oracle=oracle)
    result = evaluate_cir(protocol, method, model, vocabulary=vocabulary, ap="trapezoid")
    without = evaluate_cir(
        protocol, CirMethod(variant=variant), model, vocabulary=vocabulary, ap="trapezoid"
    )
    # the oracle's mAP, from the composition written out per query
    database = encode_image_files(model, protocol.database)
    words = read_vocabulary(vocabulary)
    memory = TextMemory(words, encode_texts(model, words))
    freedom = FreeDom.variant(variant, model.encode_text, memory, database)
    labels = freedom.invert(database)  # LTLL: the query images are the database
    per_group = {}
    for query in protocol.queries:
        label = labels[query.image]
        path = protocol.query_images[query.image]
        extra = (
            path.split("/")[-2].replace("_", " ")
            if oracle == "object"
            else {"New": "Today", "Old": "Archive"}[path.split("/")[-3]]
        )
        if variant == "E+":
            text = " ".join([*label.words, extra, query.text])
            composed = model.encode_text([text])[0]
        else:
            composed = sum(
                w * model.encode_text([f"{word} {query.text}"])[0]
                for word, w in zip([*label.words, extra], [*label.weights, 1.0])
            )
        scores = (database @ composed).tolist()
        ap = trapezoid_ap(scores, set(query.positives.tolist()))
        per_group.setdefault(query.group, []).append(100 * ap)
    for group, aps in per_group.items():
        assert result["groups"][group]["map"] == pytest.approx(np.mean(aps), abs=1e-6)
        change = result["groups"][group]["map_change"]
        assert change == pytest.approx(np.mean(aps) - without["groups"][group]["map"], abs=1e-6)
    assert result["map_change"] == pytest.approx(result["map"] - without["map"], abs=1e-9)
    assert "map_change" not in without
    assert any(row["map_change"] != 0 for row in result["groups"].values())  # it changes things


def test_oracle_needs_freedom_and_a_protocol_that_knows_classes(tmp_path):
    with pytest.raises(ConfigError, match="oracle: unknown oracle 'object' for weicom"):
        CirMethod("weicom", oracle="object")
    with pytest.raises(ConfigError, match="unknown oracle 'class'"):
        CirMethod(oracle="class")
    write_cirr(tmp_path)
    protocol = generic_protocol("cirr", tmp_path)
    with pytest.raises(DataError, match="the object oracle needs each query image's class"):
        oracle_words(protocol, "object")
