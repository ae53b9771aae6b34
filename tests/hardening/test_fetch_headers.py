"""A download whose server (or a proxy on the way) announces its size oddly, against a real HTTP
server on 127.0.0.1. The same count repeated (``Content-Length: 1000, 1000``, RFC 9110 §8.6) is
that count; a count that is not one is refused with an error naming the header. Before, both
failed with a bare ``ValueError`` from ``int()`` (a traceback from ``gspdml data fetch``)."""

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gspdml.data.fetch import Archive, download
from gspdml.errors import DataError

DATA = bytes(range(256)) * 4


@pytest.fixture
def serve():
    """``serve(*lengths)``: the URL of DATA sent with one Content-Length header per length."""
    servers = []

    def start(*lengths):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                for length in lengths:
                    self.send_header("Content-Length", length)
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(DATA)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/file.bin"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _archive(url):
    return Archive("file.bin", hashlib.md5(DATA).hexdigest(), url, size=len(DATA))


@pytest.mark.parametrize(
    "lengths", [(f"{len(DATA)}, {len(DATA)}",), (str(len(DATA)), str(len(DATA)))]
)
def test_the_same_length_repeated_is_that_length(serve, tmp_path, lengths):
    target = tmp_path / "file.bin"
    digests = download(_archive(serve(*lengths)), target, progress=False)
    assert target.read_bytes() == DATA
    assert digests["sha256"] == hashlib.sha256(DATA).hexdigest()


@pytest.mark.parametrize("lengths", [("lots",), (f"{len(DATA)}, 7",), ("1e3",), ("-5",)])
def test_a_length_that_is_not_one_count_is_refused_naming_it(serve, tmp_path, lengths):
    with pytest.raises(DataError, match=r"announced Content-Length '.*', not one byte count"):
        download(_archive(serve(*lengths)), tmp_path / "file.bin", progress=False)
    assert not (tmp_path / "file.bin").exists()
    assert not (tmp_path / "file.bin.part").exists()
