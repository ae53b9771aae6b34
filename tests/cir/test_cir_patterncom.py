"""The PatternCom protocol built from a tiny PatternNet-style tree, checked query by query, and the
published Table 5.1 checked against the query rule."""

import numpy as np
import pytest
import torch

from gspdml.cir.composition_protocol import domain_conversion_protocol, evaluate_protocol
from gspdml.cir.patterncom import TABLE_5_1, merged_class, read_patterncom, table_mismatches
from gspdml.cir.ranking import ranking_metrics
from gspdml.errors import DataError

TREE = {"airplane": 4, "bridge": 2, "overpass": 2, "tennis_court": 3, "forest": 2}


def make_tree(root):
    for folder, count in TREE.items():
        (root / "images" / folder).mkdir(parents=True)
        for i in range(count):
            (root / "images" / folder / f"{folder}{i:03d}.jpg").write_bytes(
                b""
            )  # never decoded here
    ann = root / "PatternCom"
    ann.mkdir()
    (ann / "color.csv").write_text(
        "filename,attribute,value\n"
        "airplane000.jpg,color,white\nairplane001.jpg,color,white\n"
        "airplane002.jpg,color,purple\nairplane003.jpg,color,white\n"
        "tennis_court000.jpg,color,blue\ntennis_court001.jpg,color,brown\ntennis_court002.jpg,color,red\n"
    )
    (ann / "context.csv").write_text(
        "bridge000.jpg,context,water\nbridge001.jpg,context,water\n"
        "overpass000.jpg,context,concrete\noverpass001.jpg,context,concrete\n"
    )
    return root


def test_class_merges():
    assert merged_class("dense_residential") == merged_class("sparse_residential") == "residential"
    assert merged_class("closed_road") == merged_class("intersection") == "road"
    assert merged_class("ferry_terminal") == merged_class("harbor") == "pier"
    assert merged_class("parking_lot") == merged_class("parking_space") == "parking"
    assert merged_class("overpass") == merged_class("bridge") == "roadpass"
    assert merged_class("tennis_court") == "tennis court"


def test_protocol_from_a_tiny_tree(tmp_path):
    pc = read_patterncom(make_tree(tmp_path))
    names = [p.split("/")[-1] for p in pc.protocol.database]
    assert len(names) == 13 and pc.protocol.query_images == pc.protocol.database
    idx = {n: i for i, n in enumerate(names)}
    got = [
        (names[q.image], q.text, sorted(names[i] for i in q.positives), q.group)
        for q in pc.protocol.queries
    ]
    white = ["airplane000.jpg", "airplane001.jpg", "airplane003.jpg"]
    assert got[:4] == [
        ("airplane000.jpg", "purple", ["airplane002.jpg"], "color"),
        ("airplane001.jpg", "purple", ["airplane002.jpg"], "color"),
        ("airplane002.jpg", "white", white, "color"),
        ("airplane003.jpg", "purple", ["airplane002.jpg"], "color"),
    ]
    assert got[4:6] == [
        ("tennis_court000.jpg", "brown", ["tennis_court001.jpg"], "color"),
        ("tennis_court000.jpg", "red", ["tennis_court002.jpg"], "color"),
    ]
    assert len(got) == 4 + 6 + 4
    # bridge and overpass are one class (roadpass): a bridge query asks for the overpasses
    assert ("bridge000.jpg", "concrete", ["overpass000.jpg", "overpass001.jpg"], "context") in got
    stats = pc.statistics()
    assert stats[("color", "airplane", "white")] == (3, 1) and stats[
        ("color", "airplane", "purple")
    ] == (1, 3)
    assert stats[("context", "roadpass", "water")] == (2, 2)
    assert stats[("color", "tennis court", "brown")] == (1, 2)
    assert (
        "color/airplane/white: (#positives, #queries) = (3, 1), Table 5.1 has (672, 53)"
        in table_mismatches(pc)
    )
    assert idx["forest000.jpg"] not in {q.image for q in pc.protocol.queries}


def test_table_5_1_follows_the_query_rule():
    # #queries(v) = #annotated images of the class - #positives(v); total > 21k queries (Psomas thesis §5.4.1)
    total = 0
    for by_class in TABLE_5_1.values():
        for values in by_class.values():
            annotated = sum(p for p, _ in values.values())
            for positives, queries in values.values():
                assert queries == annotated - positives
                total += queries
    assert total == 21566


def test_bad_annotations_name_file_and_line(tmp_path):
    root = make_tree(tmp_path)
    (root / "PatternCom" / "shape.csv").write_text(
        "filename,attribute,value\nriver001.jpg,shape,curved\n"
    )
    with pytest.raises(
        DataError, match=r"shape.csv:2: image 'river001.jpg' is not in the PatternNet folder tree"
    ):
        read_patterncom(root)
    with pytest.raises(DataError, match="no <attribute>.csv"):
        read_patterncom(root, annotations=tmp_path / "nowhere")


def test_evaluation_averages_groups(tmp_path):
    pc = read_patterncom(make_tree(tmp_path))
    rng = np.random.default_rng(0)
    table = torch.from_numpy(
        rng.standard_normal((len(pc.protocol.query_images), len(pc.protocol.database)))
    )
    text_bias = {
        t: rng.standard_normal(len(pc.protocol.database))
        for t in {q.text for q in pc.protocol.queries}
    }

    def score(images, texts):
        return table[images] + torch.from_numpy(np.stack([text_bias[t] for t in texts]))

    result = evaluate_protocol(
        pc.protocol, score, ap="standard", recall_at=[1, 3], chunk=5, keep_top=2
    )
    groups = {}
    for group in ("color", "context"):
        qs = [q for q in pc.protocol.queries if q.group == group]
        metrics = ranking_metrics(
            score(torch.tensor([q.image for q in qs]), [q.text for q in qs]),
            pc.protocol.relevance(qs),
            recall_at=[3],
        )
        groups[group] = 100 * metrics["ap_standard"].mean().item()
        assert result["groups"][group]["map"] == pytest.approx(groups[group])
        assert result["groups"][group]["recall@3"] == pytest.approx(
            100 * metrics["recall@3"].mean().item()
        )
        assert result["groups"][group]["queries"] == len(qs)
    assert result["map"] == pytest.approx((groups["color"] + groups["context"]) / 2)
    assert len(result["rankings"]) == 14 and len(result["rankings"][0]["indices"]) == 2


def test_domain_conversion_protocol():
    db = [f"img{i}" for i in range(6)]
    classes = ["cat", "cat", "cat", "dog", "dog", "cat"]
    domains = ["photo", "sketch", "toy", "photo", "sketch", "sketch"]
    protocol = domain_conversion_protocol(db, classes, domains, domain_texts={"toy": "toy figure"})
    first = [(q.text, q.positives.tolist(), q.group) for q in protocol.queries if q.image == 0]
    assert first == [("sketch", [1, 5], "photo->sketch"), ("toy figure", [2], "photo->toy")]
    dog = [(q.text, q.positives.tolist()) for q in protocol.queries if q.image == 4]
    assert dog == [("photo", [3]), ("toy figure", [])]
    assert len(protocol.queries) == 12
