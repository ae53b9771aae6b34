"""The composed queries of ``gspdml cir`` and its method rule, called as library functions
(:func:`~gspdml.cir.queries.read_cir_queries`, :func:`~gspdml.cir.evaluation.cir_method`):
the CLI only parses and prints around them."""

import pytest
from PIL import Image

from gspdml.cir.evaluation import CirMethod, cir_method
from gspdml.cir.queries import QuerySource, read_cir_queries
from gspdml.cir.weicom import DEFAULT_LAMBDA
from gspdml.errors import ConfigError, DataError


@pytest.fixture
def images(tmp_path):
    """Four images: a/x.png, a/y.png, b/x.png, b/y.png."""
    root = tmp_path / "images"
    for folder in ("a", "b"):
        (root / folder).mkdir(parents=True)
        for name in ("x", "y"):
            Image.new("RGB", (4, 4)).save(root / folder / f"{name}.png")
    return root


def read(images, source, command="freedom"):
    notes = []
    return read_cir_queries(command, images, source, None, notes.append), notes


def test_a_queries_csv_gives_positives_by_database_row(images, tmp_path):
    csv = tmp_path / "q.csv"
    csv.write_text("image,text,positives\na/x.png,red,b/x.png;b/y.png\nb/y.png, blue ,a/y.png\n")
    found, notes = read(images, QuerySource(queries=str(csv)))
    protocol = found.protocol
    assert found.has_positives and not notes and found.recall_at == ()
    assert protocol.database == sorted(str(p.resolve()) for p in images.rglob("*.png"))
    assert protocol.query_images == [str(images / "a/x.png"), str(images / "b/y.png")]
    assert [(q.image, q.text, q.positives.tolist()) for q in protocol.queries] == [
        (0, "red", [2, 3]),
        (1, "blue", [1]),
    ]
    csv.write_text("image,text\na/x.png,red\n")
    found, _ = read(images, QuerySource(queries=str(csv)))
    assert not found.has_positives and found.protocol.queries[0].positives.size == 0


def test_a_queries_csv_is_refused_naming_file_line_and_value(images, tmp_path):
    csv = tmp_path / "q.csv"
    csv.write_text("image,text,positives\na/x.png,red,c/z.png\n")
    with pytest.raises(DataError, match=r"q.csv:2: positive 'c/z.png' is not an image under"):
        read(images, QuerySource(queries=str(csv)))
    csv.write_text("image,text,positives\na/x.png,red,\n")
    with pytest.raises(DataError, match="the positives column is empty for every query"):
        read(images, QuerySource(queries=str(csv)))
    csv.write_text("image,words\na/x.png,red\n")
    with pytest.raises(DataError, match="needs a header with columns image, text .*missing: text"):
        read(images, QuerySource(queries=str(csv)))
    csv.write_text("image,text\na/x.png, \n")
    with pytest.raises(DataError, match=r"q.csv:2: empty image/text value"):
        read(images, QuerySource(queries=str(csv)))


def test_a_labels_csv_is_the_domain_conversion_protocol_with_the_domain_texts(images, tmp_path):
    csv = tmp_path / "labels.csv"
    csv.write_text("path,class,domain\na/x.png,cat,real\na/y.png,cat,toy\nb/x.png,dog,real\n")
    source = QuerySource(labels=str(csv), domain_texts=("toy=toy figure",))
    protocol = read(images, source)[0].protocol
    texts = {(q.group, q.text) for q in protocol.queries}
    assert texts == {("real->toy", "toy figure"), ("toy->real", "real")}
    cat_in_toy = [q for q in protocol.queries if q.group == "real->toy" and q.image == 0]
    assert cat_in_toy[0].positives.tolist() == [1]  # the cat image of the toy domain
    with pytest.raises(ConfigError, match="domain-text: expected LABEL=TEXT"):
        read(images, QuerySource(labels=str(csv), domain_texts=("toy",)))
    csv.write_text("path,class,domain\nc/z.png,cat,real\n")
    with pytest.raises(DataError, match="1 labelled images are not under"):
        read(images, QuerySource(labels=str(csv)))


def test_exactly_one_source_each_command_offers(images, tmp_path):
    with pytest.raises(ConfigError, match="give exactly one of --labels, --queries, --dataset$"):
        read(images, QuerySource())
    both = QuerySource(labels="l.csv", queries="q.csv")
    with pytest.raises(ConfigError, match="give exactly one of --labels, --queries, --patterncom"):
        read(images, both, "weicom")
    with pytest.raises(ConfigError, match="--source selects source domains of a --dataset"):
        read(images, QuerySource(queries="q.csv", sources=("real",)))


def test_the_method_rule_of_each_command():
    """WeiCom's λ: the model's under ``cir weicom`` (Psomas thesis Table 5.2), 0.5 as the
    chapter-4 competitor under ``cir freedom``; an explicit λ wins; other methods keep the
    default λ; FreeDom's settings pass through."""
    assert cir_method("weicom", "weicom", "clip").lam == DEFAULT_LAMBDA["clip"] == 0.3
    assert cir_method("weicom", "weicom", "RemoteCLIP").lam == 0.6
    assert cir_method("weicom", "weicom", "hf:some/other").lam == 0.5
    assert cir_method("freedom", "weicom", "remoteclip").lam == 0.5
    assert cir_method("weicom", "weicom", "clip", lam=0.7).lam == 0.7
    assert cir_method("weicom", "text", "clip", lam=0.7) == CirMethod("text")
    method = cir_method("freedom", "freedom", "clip", variant="L", k=5, n=3, m=2)
    assert method == CirMethod("freedom", "L", 5, 3, 2)
    assert CirMethod().lam == 0.5
