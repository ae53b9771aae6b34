"""Dataset fetch against a real HTTP server on 127.0.0.1: resume, checksums, atomic extraction."""

import dataclasses
import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from gspdml.data import catalog
from gspdml.data.cars import read_cars
from gspdml.data.fetch import DOWNLOADS, Archive, DatasetSource, download, fetch
from gspdml.data.image_splits import OfficialSplits, Records
from gspdml.errors import DataError
from tests.helpers.datasets import make_cars_devkit
from tests.robustness.faults import file_size_limit


def tar_gz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Server:
    """Serves ``files`` {path: bytes} with Range support; ``cut[path] = n`` makes the next full
    (non-range) response of that path stop after n bytes (a dropped connection); paths in
    ``unsized`` are sent without a Content-Length (the body ends when the connection closes)."""

    def __init__(self):
        self.files, self.cut, self.ranges, self.unsized = {}, {}, [], set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                data = outer.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                header = self.headers.get("Range")
                start = int(header.split("=")[1].split("-")[0]) if header else 0
                outer.ranges.append(header)
                if start >= len(data):
                    self.send_response(416)
                    self.end_headers()
                    return
                self.send_response(206 if header else 200)
                if header:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                if self.path not in outer.unsized:
                    self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                if not header and self.path in outer.cut:
                    body = body[: outer.cut.pop(self.path)]
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def count_check(expected):
    def check(folder: Path) -> int:
        images = sorted(p for p in folder.rglob("*.jpg"))
        if len(images) != expected:
            raise DataError(f"{folder}: {len(images)} images, expected {expected}")
        return len(images)

    return check


def md5(data):
    return hashlib.md5(data).hexdigest()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def toy(server, **pins) -> Archive:
    return Archive("toy.tgz", url=server.url + "/toy.tgz", **({"md5": md5(ARCHIVE)} | pins))


IMAGES = {f"Toy/images/{i:03d}.jpg": np.random.default_rng(i).bytes(5000) for i in range(40)}
ARCHIVE = tar_gz(IMAGES)  # incompressible: ~200 kB


def test_interrupted_download_resumes_with_a_range_request(server, tmp_path):
    server.files["/toy.tgz"] = ARCHIVE
    server.cut["/toy.tgz"] = 3000
    target = tmp_path / "toy.tgz"
    with pytest.raises(
        DataError, match="interrupted after 3000 of .* bytes; run the same command again to resume"
    ):
        download(toy(server), target, progress=False)
    assert (tmp_path / "toy.tgz.part").stat().st_size == 3000 and not target.exists()
    digests = download(toy(server), target, progress=False)
    assert server.ranges == [None, "bytes=3000-"]
    assert target.read_bytes() == ARCHIVE and not (tmp_path / "toy.tgz.part").exists()
    assert digests == {"md5": md5(ARCHIVE), "sha256": hashlib.sha256(ARCHIVE).hexdigest()}


def test_server_without_range_support_restarts_the_download(server, tmp_path):
    server.files["/toy.tgz"] = ARCHIVE
    (tmp_path / "toy.tgz.part").write_bytes(b"garbage")
    server.cut = {}
    handler_get = server.httpd.RequestHandlerClass.do_GET

    def ignore_range(self):
        del self.headers["Range"]
        handler_get(self)

    server.httpd.RequestHandlerClass.do_GET = ignore_range
    download(toy(server), tmp_path / "toy.tgz", progress=False)
    assert (tmp_path / "toy.tgz").read_bytes() == ARCHIVE


def test_an_archive_without_url_is_named_not_passed_to_urllib(tmp_path):
    """The old code handed ``url=None`` to urllib (a ValueError: unknown url type)."""
    placed_only = Archive("manual.zip", md5=md5(b"x"))
    with pytest.raises(DataError, match="manual.zip: has no download URL"):
        download(placed_only, tmp_path / "manual.zip", progress=False)


def test_wrong_checksum_is_refused_and_the_file_deleted(server, tmp_path):
    corrupted = bytearray(ARCHIVE)
    corrupted[100] ^= 0xFF
    server.files["/toy.tgz"] = bytes(corrupted)
    source = DatasetSource(
        "toy", (Archive("toy.tgz", md5(ARCHIVE), server.url + "/toy.tgz"),), count_check(40)
    )
    with pytest.raises(
        DataError,
        match=f"checksum mismatch for toy.tgz: MD5 {md5(bytes(corrupted))}, expected {md5(ARCHIVE)}",
    ):
        fetch(source, tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.rglob("*")) == [DOWNLOADS]


def test_every_pinned_digest_must_match(server, tmp_path):
    server.files["/toy.tgz"] = ARCHIVE
    with pytest.raises(DataError, match=f"SHA-256 {sha256(ARCHIVE)}, expected {'0' * 64}"):
        download(
            toy(server, sha256="0" * 64), tmp_path / "toy.tgz", progress=False
        )  # the MD5 matches
    assert not list(tmp_path.iterdir())
    only_sha = toy(server, md5=None, sha256=sha256(b"other"))
    with pytest.raises(DataError, match=f"SHA-256 {sha256(ARCHIVE)}, expected {sha256(b'other')}"):
        download(only_sha, tmp_path / "toy.tgz", progress=False)
    assert download(
        toy(server, sha256=sha256(ARCHIVE), size=len(ARCHIVE)), tmp_path / "toy.tgz", progress=False
    )["md5"] == md5(ARCHIVE)
    with pytest.raises(ValueError, match="needs a pinned MD5 or SHA-256"):
        Archive("toy.tgz", url=server.url + "/toy.tgz")


def test_a_server_offering_another_size_is_refused_before_downloading(server, tmp_path):
    server.files["/toy.tgz"] = ARCHIVE
    with pytest.raises(
        DataError,
        match=f"offers {len(ARCHIVE)} bytes for toy.tgz, the pinned archive has {len(ARCHIVE) + 1}",
    ):
        download(toy(server, size=len(ARCHIVE) + 1), tmp_path / "toy.tgz", progress=False)
    assert not list(tmp_path.iterdir())  # not even a partial file


def test_a_server_announcing_no_size_is_stopped_one_byte_past_the_pinned_size(server, tmp_path):
    """Hardening item 14: the size was checked only against Content-Length, so a server sending
    none streamed 20 MiB for a 1,000-byte archive; now the download stops at the pinned size + 1
    byte, the partial file is deleted and the error says so. A matching unsized body still
    downloads."""
    server.files["/toy.tgz"] = ARCHIVE
    server.unsized.add("/toy.tgz")
    with pytest.raises(DataError, match="sent more than the pinned 1000 bytes of toy.tgz"):
        download(toy(server, size=1000), tmp_path / "toy.tgz", progress=False)
    assert not list(tmp_path.iterdir())
    pinned = toy(server, size=len(ARCHIVE))
    assert download(pinned, tmp_path / "toy.tgz", progress=False)["md5"] == md5(ARCHIVE)


def test_a_full_disk_while_downloading_says_so_and_keeps_the_part(server, tmp_path):
    """Hardening item 20: a full disk while the archive streams in said "download interrupted"
    (as if the connection dropped); it names the file it could not write and the fix, and the
    bytes written so far stay for the resume."""
    server.files["/toy.tgz"] = ARCHIVE
    with file_size_limit(50_000), pytest.raises(DataError) as failure:
        download(toy(server), tmp_path / "toy.tgz", progress=False)
    part = tmp_path / "toy.tgz.part"
    assert str(failure.value).startswith(f"cannot write {part}: File too large after 50000 bytes")
    assert "free some space" in str(failure.value) and part.stat().st_size == 50_000
    assert download(toy(server), tmp_path / "toy.tgz", progress=False)["md5"] == md5(ARCHIVE)


def test_the_catalog_pins_sha256_and_size_where_they_are_published():
    cub, sop = catalog.SOURCES["cub"].archives[0], catalog.SOURCES["sop"].archives[0]
    assert (cub.size, sop.size) == (1150585339, 3083860082) and len(cub.sha256) == len(
        sop.sha256
    ) == 64
    devkit = catalog.SOURCES["cars"].alternatives[0]
    assert all(a.sha256 and a.size and a.url is None for a in devkit)


def test_fetch_extracts_verifies_and_records_digests(server, tmp_path):
    server.files["/toy.tgz"] = ARCHIVE
    server.files["/meta.mat"] = b"annotations"
    source = DatasetSource(
        "toy",
        (
            Archive("toy.tgz", md5(ARCHIVE), server.url + "/toy.tgz"),
            Archive("meta.mat", md5(b"annotations"), server.url + "/meta.mat", extract=False),
        ),
        count_check(40),
    )
    assert fetch(source, tmp_path, progress=False) == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".downloads",
        ".gspdml-fetch-toy.json",
        "Toy",
        "meta.mat",
    ]
    assert (tmp_path / "Toy/images/007.jpg").read_bytes() == IMAGES["Toy/images/007.jpg"]
    assert hashlib.sha256(ARCHIVE).hexdigest() in (tmp_path / ".gspdml-fetch-toy.json").read_text()
    server.files.clear()  # a second fetch reuses the checked download
    assert fetch(source, tmp_path, progress=False) == 40


def test_a_failed_check_leaves_nothing_half_extracted(server, tmp_path):
    short = tar_gz({f"Toy/images/{i:03d}.jpg": b"x" for i in range(39)})
    server.files["/toy.tgz"] = short
    source = DatasetSource(
        "toy", (Archive("toy.tgz", md5(short), server.url + "/toy.tgz"),), count_check(40)
    )
    with pytest.raises(DataError, match="39 images, expected 40"):
        fetch(source, tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [DOWNLOADS]


def test_unsafe_archive_members_are_refused(server, tmp_path):
    evil = tar_gz({"../escape.jpg": b"x"})
    server.files["/evil.tgz"] = evil
    source = DatasetSource(
        "evil", (Archive("evil.tgz", md5(evil), server.url + "/evil.tgz"),), count_check(1)
    )
    with pytest.raises(DataError, match=r"refusing archive member '\.\./escape\.jpg'"):
        fetch(source, tmp_path, progress=False)
    assert not (tmp_path.parent / "escape.jpg").exists()


def test_datasets_without_url_print_manual_steps_and_check_placed_archives(tmp_path):
    with pytest.raises(DataError, match="torchvision issue #7545"):
        fetch(catalog.SOURCES["cars"], tmp_path, progress=False)
    (tmp_path / "car_ims.tgz").write_bytes(b"not the archive")
    with pytest.raises(
        DataError,
        match=f"car_ims.tgz: checksum mismatch: MD5 {md5(b'not the archive')}, expected d5c8f0aa",
    ):
        fetch(catalog.SOURCES["cars"], tmp_path, progress=False)
    with pytest.raises(DataError, match="Google Drive"):
        fetch(catalog.SOURCES["inshop"], tmp_path, progress=False)
    (tmp_path / "car_ims.tgz").unlink()
    (tmp_path / "car_devkit.tgz").write_bytes(b"not the devkit")
    with pytest.raises(
        DataError,
        match=f"car_devkit.tgz: checksum mismatch: SHA-256 {sha256(b'not the devkit')}, expected b97deb46",
    ):
        fetch(catalog.SOURCES["cars"], tmp_path, progress=False)


def test_placed_devkit_release_is_checked_extracted_and_read(tmp_path, write_image):
    """The catalog's devkit set (names, what is extracted), pinned to archives generated here."""
    tree = tmp_path / "tree"
    make_cars_devkit(tree, write_image, classes=4, per_class=2)
    files = {
        "cars_train.tgz": tar_gz(
            {f"cars_train/{p.name}": p.read_bytes() for p in (tree / "cars_train").iterdir()}
        ),
        "cars_test.tgz": tar_gz(
            {f"cars_test/{p.name}": p.read_bytes() for p in (tree / "cars_test").iterdir()}
        ),
        "car_devkit.tgz": tar_gz(
            {f"devkit/{p.name}": p.read_bytes() for p in (tree / "devkit").iterdir()}
        ),
        "cars_test_annos_withlabels.mat": (tree / "cars_test_annos_withlabels.mat").read_bytes(),
    }
    devkit = tuple(
        dataclasses.replace(a, sha256=sha256(files[a.filename]), size=len(files[a.filename]))
        for a in catalog.CARS_DEVKIT
    )
    real = catalog.SOURCES["cars"]
    source = dataclasses.replace(
        real, alternatives=(devkit,), check=catalog.listed_images(read_cars, 8)
    )
    root = tmp_path / "root"
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)
    assert fetch(source, root, progress=False) == 8
    assert {p.name for p in root.iterdir()} >= {
        "cars_train",
        "cars_test",
        "devkit",
        "cars_test_annos_withlabels.mat",
    }
    assert catalog.detect(root) == "cars"


def test_verify_uses_the_readers_and_finds_missing_images(tmp_path):
    with pytest.raises(DataError, match="cannot tell which dataset"):
        catalog.verify(tmp_path)
    base = tmp_path / "CUB_200_2011"
    (base / "images").mkdir(parents=True)
    (base / "images.txt").write_text("1 a/1.jpg\n2 b/2.jpg\n")
    (base / "image_class_labels.txt").write_text("1 1\n2 2\n")
    with pytest.raises(
        DataError, match="the dataset lists 2 images; the official dataset has 11788"
    ):
        catalog.verify(tmp_path)
    (tmp_path / "a.jpg").write_bytes(b"x")

    def reader(root):
        paths = [str(Path(root) / "a.jpg"), str(Path(root) / "b.jpg")]
        return OfficialSplits(train=Records(paths[:1], [1]), test=Records(paths[1:], [2]))

    with pytest.raises(DataError, match=r"1 of the 2 listed images are missing, e\.g\. .*b\.jpg"):
        catalog.listed_images(reader, 2)(tmp_path)
    (tmp_path / "b.jpg").write_bytes(b"x")
    assert catalog.listed_images(reader, 2)(tmp_path) == 2


def test_cli_reports_errors_and_manual_steps(tmp_path, capsys):
    from gspdml.cli import main

    assert main(["data", "fetch", "inshop", "--root", str(tmp_path)]) == 2
    assert "gspdml: error: inshop: cannot be downloaded automatically" in capsys.readouterr().err
    assert main(["data", "verify", str(tmp_path), "--dataset", "sop"]) == 2
    assert "Ebay_train.txt" in capsys.readouterr().err


def test_a_partial_download_that_is_a_link_is_never_written_through(server, tmp_path):
    """issue 39 sibling of defect 1: a link at ``.downloads/<file>.part`` (a received dataset
    root) is refused; the file it names is not appended to or emptied."""
    server.files["/toy.tgz"] = ARCHIVE
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    (tmp_path / "root" / DOWNLOADS).mkdir(parents=True)
    (tmp_path / "root" / DOWNLOADS / "toy.tgz.part").symlink_to(victim)
    with pytest.raises(DataError, match=r"toy\.tgz\.part is a symbolic link.*remove it"):
        download(toy(server), tmp_path / "root" / DOWNLOADS / "toy.tgz", progress=False)
    assert victim.read_text() == "the user's file\n"


def test_a_download_in_progress_is_not_written_by_a_second_fetch(server, tmp_path):
    import fcntl

    server.files["/toy.tgz"] = ARCHIVE
    part = tmp_path / "toy.tgz.part"
    part.write_bytes(ARCHIVE[:1000])
    with open(part, "rb") as first:  # the first fetch's hold on its partial file
        fcntl.flock(first.fileno(), fcntl.LOCK_EX)
        with pytest.raises(DataError, match="another fetch is downloading .*toy.tgz.part"):
            download(toy(server), tmp_path / "toy.tgz", progress=False)
    assert part.read_bytes() == ARCHIVE[:1000]
    download(toy(server), tmp_path / "toy.tgz", progress=False)  # released: it resumes
    assert (tmp_path / "toy.tgz").read_bytes() == ARCHIVE
