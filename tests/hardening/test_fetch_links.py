"""``gspdml data fetch`` into a dataset root whose ``.downloads`` is a symbolic link (a root
received from someone else, or a link left by another tool) refuses it before downloading: the
archive and its partial file are never written through the link, out of the root. Before, the
download went into the folder the link named (only the ``.part`` file itself was opened
without following a link). A folder where the downloaded archive goes is refused before the
download; before, the whole archive was downloaded and then failed to replace it with a bare
``IsADirectoryError``."""

import os

import pytest

from gspdml.data.fetch import DOWNLOADS, Archive, DatasetSource, fetch
from gspdml.errors import DataError
from gspdml.output_files import OutputError
from tests.data.test_data_fetch import ARCHIVE, Server, count_check, md5


@pytest.fixture
def server():
    s = Server()
    s.files["/toy.tgz"] = ARCHIVE
    yield s
    s.close()


def _source(server):
    archive = Archive("toy.tgz", md5(ARCHIVE), server.url + "/toy.tgz")
    return DatasetSource("toy", (archive,), count_check(40))


def test_a_downloads_folder_that_is_a_link_out_of_the_root_is_refused(server, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "root").mkdir()
    os.symlink(outside, tmp_path / "root" / DOWNLOADS)
    with pytest.raises(OutputError, match=r"root/\.downloads is a symbolic link .*outside"):
        fetch(_source(server), tmp_path / "root", progress=False)
    assert list(outside.iterdir()) == [] and server.ranges == []  # nothing asked, nothing written


def test_a_root_without_links_is_fetched(server, tmp_path):
    assert fetch(_source(server), tmp_path / "root", progress=False) == 40
    assert (tmp_path / "root" / DOWNLOADS / "toy.tgz").read_bytes() == ARCHIVE


def test_a_folder_where_the_archive_goes_is_refused_before_downloading(server, tmp_path):
    (tmp_path / "root" / DOWNLOADS / "toy.tgz").mkdir(parents=True)
    with pytest.raises(DataError, match=r"\.downloads/toy\.tgz is a folder, where the downloaded"):
        fetch(_source(server), tmp_path / "root", progress=False)
    assert server.ranges == []  # refused before the download, not after it


def test_a_link_to_an_archive_placed_elsewhere_is_used_without_downloading(server, tmp_path):
    (tmp_path / "elsewhere.tgz").write_bytes(ARCHIVE)
    (tmp_path / "root" / DOWNLOADS).mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere.tgz", tmp_path / "root" / DOWNLOADS / "toy.tgz")
    assert fetch(_source(server), tmp_path / "root", progress=False) == 40
    assert server.ranges == [] and (tmp_path / "elsewhere.tgz").read_bytes() == ARCHIVE
