"""server.py: routing, MIME types, caching, and refusal of paths outside the served folders."""

from __future__ import annotations

import http.client
import json
import socket
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from py_harness.host import exchange, paths
from py_harness.host.serving import server

SECRET = "TOP-SECRET-do-not-serve"


def fetch(base_url: str, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    # http.client sends the path verbatim (no normalisation of "..", unlike a browser).
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree shaped like the repo, with secrets next to it and symlinks pointing at them."""
    root = tmp_path_factory.mktemp("site")
    (root / "secret.txt").write_text(SECRET)
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text(SECRET)
    files = {
        "demo/index.html": "<!doctype html>",
        "demo/app.js": "export {};",
        "demo/sub/page.html": "<p>",
        "shaders/k.wgsl": "@compute @workgroup_size(1) fn main() {}",
        "pyodide/pyodide.mjs": "export {};",
        "pyodide/pyodide.asm.wasm": "\0asm",
        "pyodide/pyodide-lock.json": "{}",
        "dist/pyodide-lock.json": "{}",
        "dist/py_harness-0.1.0-py3-none-any.whl": "PK",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "demo" / "escape.txt").symlink_to(root / "secret.txt")
    (root / "demo" / "escape_dir").symlink_to(root / "outside", target_is_directory=True)
    (root / "demo" / "alias.js").symlink_to(root / "demo" / "app.js")  # stays inside: allowed
    return root


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    routes = {name: site / name for name in ("demo", "shaders", "pyodide", "dist")}
    srv, url = server.start_server(port=0, routes=routes)
    yield url
    server.stop(srv)


@pytest.mark.parametrize(
    ("path", "mime"),
    [
        ("/demo/index.html", "text/html"),
        ("/demo/app.js", "text/javascript"),
        ("/demo/alias.js", "text/javascript"),
        ("/shaders/k.wgsl", "text/plain"),
        ("/pyodide/pyodide.mjs", "text/javascript"),
        ("/pyodide/pyodide.asm.wasm", "application/wasm"),
        ("/pyodide/pyodide-lock.json", "application/json"),
        ("/dist/pyodide-lock.json", "application/json"),
        ("/dist/py_harness-0.1.0-py3-none-any.whl", "application/zip"),
        ("/demo/index.html?cache=bust#frag", "text/html"),
    ],
)
def test_serves_files_with_mime(base_url: str, site: Path, path: str, mime: str) -> None:
    status, headers, body = fetch(base_url, path)
    assert status == 200
    assert headers["Content-Type"].split(";")[0] == mime
    rel = path.split("?")[0].lstrip("/")
    assert body == (site / rel).read_bytes()
    assert int(headers["Content-Length"]) == len(body)


def test_cache_headers(base_url: str) -> None:
    # Edited live by kernel developers: never cached.
    for path in ("/demo/index.html", "/shaders/k.wgsl", "/dist/pyodide-lock.json"):
        assert fetch(base_url, path)[1]["Cache-Control"] == "no-store"
    assert "max-age" in fetch(base_url, "/pyodide/pyodide.mjs")[1]["Cache-Control"]


def test_head_has_headers_only(base_url: str) -> None:
    status, headers, body = fetch(base_url, "/demo/app.js", method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Length"] == str(len("export {};"))


def test_root_redirects_to_index(base_url: str) -> None:
    status, headers, _ = fetch(base_url, "/")
    assert status == 302
    assert headers["Location"] == "/demo/index.html"


@pytest.mark.parametrize(
    "path", ["/demo", "/demo/", "/demo/sub", "/demo/sub/", "/dist/", "/nope/x", "/demo/missing.js"]
)
def test_directories_and_unknown_paths_are_404(base_url: str, path: str) -> None:
    status, _, body = fetch(base_url, path)
    assert status == 404
    assert b"page.html" not in body  # no listing


@pytest.mark.parametrize(
    "path",
    [
        "/demo/../secret.txt",
        "/demo/%2e%2e/secret.txt",
        "/demo/%2E%2E%2Fsecret.txt",
        "/demo/..%2fsecret.txt",
        "/demo/..%5csecret.txt",
        "/shaders/%2e%2e%2f%2e%2e%2fetc/passwd",
        "/%2e%2e/secret.txt",
        "/demo/./../secret.txt",
        "/demo//etc/passwd",
        "/demo/%2fetc%2fpasswd",
        "/demo/index.html%00.js",
        "/demo/%00",
        "/demo/escape.txt",
        "/demo/escape_dir/secret.txt",
        "/demo/%ff%fe",
    ],
)
def test_traversal_is_refused(base_url: str, path: str) -> None:
    status, _, body = fetch(base_url, path)
    assert status in (400, 403, 404), path
    assert SECRET.encode() not in body and b"root:" not in body


def test_raw_nul_byte_is_refused(base_url: str) -> None:
    # http.client refuses to send a raw NUL, so speak HTTP over a socket.
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /demo/index.html\x00/../../secret.txt HTTP/1.0\r\n\r\n")
        reply = b"".join(iter(lambda: sock.recv(65536), b""))
    assert reply.split(b" ", 2)[1] in (b"400", b"403", b"404")
    assert SECRET.encode() not in reply


def test_default_routes_refuse_repo_files() -> None:
    srv, url = server.start_server(port=0)
    try:
        for path in ("/demo/../server.py", "/demo/%2e%2e/server.py", "/demo/..%2fserver.py"):
            status, _, body = fetch(url, path)
            assert status in (403, 404), path
            assert b"ThreadingHTTPServer" not in body
        if (paths.pyodide_dir() / "pyodide.asm.wasm").exists():
            status, headers, _ = fetch(url, "/pyodide/pyodide.asm.wasm", method="HEAD")
            assert (status, headers["Content-Type"]) == (200, "application/wasm")
        status, headers, _ = fetch(url, "/harness/harness.js", method="HEAD")
        assert (status, headers["Content-Type"]) == (200, "text/javascript")
        # The test page and the demo each under their own route, neither under the other's.
        for page in ("/harness/harness.html", "/demo/index.html", "/demo/demo.js"):
            assert fetch(url, page, method="HEAD")[0] == 200, page
        for elsewhere in ("/harness/demo.js", "/demo/harness.js", "/web/harness.html"):
            assert fetch(url, elsewhere, method="HEAD")[0] == 404, elsewhere
        for node_only in ("/harness/node-harness.mjs", "/harness/pyodide-snapshot.mjs"):
            assert fetch(url, node_only, method="HEAD")[0] == 404, node_only
    finally:
        server.stop(srv)


def test_built_wheel_excludes_host_and_is_in_lock() -> None:
    build_wheel = pytest.importorskip("py_harness.host.dist.build_wheel")
    if not build_wheel.input_lock().exists():
        pytest.skip("node_modules/pyodide missing (run `npm ci`)")
    result = build_wheel.build(log=lambda _msg: None)
    names = zipfile.ZipFile(result.wheel).namelist()
    assert "py_harness/page.py" in names
    assert not [n for n in names if n.startswith("py_harness/host/")]
    # Second call must be a no-op thanks to the content stamp.
    assert build_wheel.build(log=lambda _msg: None).rebuilt is False


def test_an_exchange_body_is_served_once_to_a_get(base_url: str) -> None:
    box = exchange.for_url(base_url)
    assert box is not None
    path = box.put(b'{"big": "request"}')
    assert fetch(base_url, path, "HEAD")[0] == 405  # a HEAD does not use up the GET
    status, headers, body = fetch(base_url, path)
    assert (status, body) == (200, b'{"big": "request"}')
    assert headers["Content-Type"] == "application/json"
    assert fetch(base_url, path)[0] == 404  # taken
    assert fetch(base_url, exchange.PREFIX + "made-up-token")[0] == 404
    assert box.waiting() == 0


def post(
    base_url: str, path: str, body: bytes, ctype: str = "application/octet-stream"
) -> tuple[int, bytes]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": ctype})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_a_reply_slot_takes_one_post_of_its_room(base_url: str) -> None:
    box = exchange.for_url(base_url)
    assert box is not None
    frame = exchange.pack('{"ok": 1}', [b"\x01\x02\x03\x04"])
    slot = box.expect(len(frame))
    assert post(base_url, slot, frame, "application/json")[0] == 415
    assert post(base_url, slot, frame + b"x")[0] == 413  # over its room: refused unread
    assert fetch(base_url, slot)[0] == 404  # a slot is no body to GET
    assert post(base_url, slot, frame) == (200, b'{"received": %d}' % len(frame))
    assert post(base_url, slot, frame)[0] == 404  # filled: one POST only
    assert box.collect(slot) == frame and box.collect(slot) is None
    assert post(base_url, exchange.PREFIX + "made-up-token", b"")[0] == 404
    # A body waiting for its GET takes no POST, and is still there after one.
    path = box.put(b"{}")
    assert post(base_url, path, b"{}")[0] == 404
    assert fetch(base_url, path)[0] == 200 and box.waiting() == 0


def test_frames_carry_text_and_blobs_aligned_and_refuse_what_is_torn() -> None:
    blobs = [b"", b"\x00" * 4, np.arange(3, dtype="<f4").tobytes(), b"abcdefgh"]
    for text in ("{}", '{"a": "\u00e9"}', "[1, 2, 3]"):
        frame = exchange.pack(text, blobs)
        got_text, got = exchange.unpack(frame)
        assert json.loads(got_text) == json.loads(text)
        assert [bytes(b) for b in got] == blobs
        assert all(b.obj is frame for b in got)  # views of the frame, not copies
        # every blob starts 4-aligned in the frame (f32 views need no copy)
        starts = [len(frame) - sum(len(x) for x in blobs[i:]) for i in range(len(blobs))]
        assert all(s % exchange.FRAME_ALIGN == 0 for s in starts)

    class FourGiB(bytes):  # its length alone: refused before any byte is read
        def __len__(self) -> int:
            return 2**32

    with pytest.raises(ValueError, match=r"blob 1 has 4294967296 bytes; a frame holds at most"):
        exchange.pack("{}", [b"", FourGiB()])
    frame = exchange.pack("{}", blobs)
    for torn, why in (
        (frame[:5], "at least 8 bytes"),
        (frame[:-1], "does not hold"),
        (frame + b"\x00", "does not hold"),
        (b"\x00\x00\x00\x00\xff\xff\x00\x00", "cannot list"),
    ):
        with pytest.raises(ValueError, match=why):
            exchange.unpack(torn)


def test_a_stopped_server_has_no_exchange(site: Path) -> None:
    srv, url = server.start_server(port=0, routes={"demo": site / "demo"})
    assert exchange.for_url(url) is srv.exchange
    server.stop(srv)
    assert exchange.for_url(url) is None
