"""The FreeDom domain-conversion readers on tiny trees in the layout of the authors' release."""

import pytest

from gspdml.cir.domain_datasets import (
    DOMAIN_DATASETS,
    domain_dataset_protocol,
    read_image_list,
)
from gspdml.errors import ConfigError, DataError
from tests.helpers.freedom_release import LAYOUTS, write_release_tree


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_reader_builds_the_domain_conversion_protocol(tmp_path, name):
    database, queries = write_release_tree(tmp_path, name)
    protocol = domain_dataset_protocol(name, tmp_path)
    labels, classes, per, query_per = LAYOUTS[name]
    texts = DOMAIN_DATASETS[name].domain_texts
    assert (
        len(protocol.database)
        == len(database)
        == len(labels) * len(classes) * (per - (query_per or 0))
    )
    assert len(protocol.query_images) == len(queries)
    assert len(protocol.queries) == len(queries) * (len(labels) - 1)
    assert set(protocol.database).isdisjoint(protocol.query_images) == (query_per is not None)
    # every (query image, other domain) once, positives by a direct scan of the list lines
    rows = [line.split() for line in database]
    seen = set()
    for query in protocol.queries:
        _, q_domain, q_class = queries[query.image].split()
        source, target = query.group.split("->")
        assert source == q_domain and target != q_domain and query.text == texts[target]
        want = [i for i, (_, domain, cls) in enumerate(rows) if domain == target and cls == q_class]
        assert query.positives.tolist() == want and len(want) == per - (query_per or 0)
        assert all(protocol.database[i].endswith(rows[i][0]) for i in want)
        seen.add((query.image, target))
    assert len(seen) == len(protocol.queries)
    assert all(str(tmp_path) in p for p in protocol.database)


def test_source_filter_keeps_one_source_domain(tmp_path):
    write_release_tree(tmp_path, "imagenet_r")
    protocol = domain_dataset_protocol("imagenet_r", tmp_path, sources=["real"])
    assert protocol.groups() == ["real->cartoon", "real->origami", "real->sculpture", "real->toy"]
    assert len(protocol.queries) == 2 * 2 * 4  # 2 classes x 2 photos, 4 targets
    with pytest.raises(ConfigError, match="'photo'"):
        domain_dataset_protocol("imagenet_r", tmp_path, sources=["photo"])


def test_reader_errors_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="imagenet_r, minidn, nico, ltll"):
        domain_dataset_protocol("domainnet", tmp_path)
    with pytest.raises(DataError, match="must hold nico/"):
        domain_dataset_protocol("nico", tmp_path)
    write_release_tree(tmp_path, "nico")
    (tmp_path / "nico" / "query_files.csv").unlink()
    with pytest.raises(DataError, match="image list not found: .*query_files.csv"):
        domain_dataset_protocol("nico", tmp_path)
    write_release_tree(tmp_path, "ltll")
    listing = tmp_path / "ltll" / "full_files.csv"
    lines = listing.read_text().splitlines()
    listing.write_text("\n".join(lines + ["ltll/New/x y.jpg New TajMahal"]))
    with pytest.raises(DataError, match=f"full_files.csv:{len(lines) + 1}: expected 'PATH DOMAIN"):
        domain_dataset_protocol("ltll", tmp_path)
    listing.write_text("\n".join(lines + ["ltll/Mid/x.jpg Mid TajMahal"]))
    with pytest.raises(DataError, match="unknown domain 'Mid'; this dataset has New, Old"):
        domain_dataset_protocol("ltll", tmp_path)
    listing.write_text("\n".join(lines + ["ltll/New/gone.jpg New TajMahal"]))
    with pytest.raises(DataError, match="1 of 13 listed images do not exist, e.g. .*gone.jpg"):
        domain_dataset_protocol("ltll", tmp_path)
    assert len(domain_dataset_protocol("ltll", tmp_path, check_images=False).database) == 13
    listing.write_text("\n")
    with pytest.raises(DataError, match="the image list is empty"):
        read_image_list(listing, tmp_path)
