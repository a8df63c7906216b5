"""Static file server for the browser harness (standard library only).

Routes: /web/ -> web/, /shaders/ -> shaders/, /pyodide/ -> node_modules/pyodide/,
/dist/ -> the Pyodide wheel + pyodide-lock.json (host/paths.py locates each);
/ redirects to /web/index.html.
/api/ is the demo page's NumPy side (api.py beside this module, imported on first use so that
this module stays standard-library only); POST bodies over --max-body-mb get a 413.

    python server.py [--host 127.0.0.1] [--port 8000] [--verbose] [--skip-build]
                     [--max-body-mb 64]

Serve on 127.0.0.1 or localhost: browsers expose navigator.gpu only in a secure context.
Tests use ``start_server()`` / ``stop()``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mimetypes
import os
import shutil
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from .. import paths


def default_routes() -> dict[str, Path]:
    """The four folders the pages use (host/paths.py says where each one is)."""
    return {
        "web": paths.WEB_DIR,
        "shaders": paths.SHADER_DIR,
        "pyodide": paths.pyodide_dir(),
        "dist": paths.dist_dir(),
    }


# Explicit types: mimetypes depends on /etc/mime.types and misses .wasm/.mjs/.wgsl on some
# systems; Pyodide needs application/wasm for streaming compilation.
MIME_TYPES = {
    ".wasm": "application/wasm",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".json": "application/json",
    ".map": "application/json",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".wgsl": "text/plain; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".py": "text/plain; charset=utf-8",
}
# web/ and shaders/ are edited while the server runs, dist/ is rebuilt: never cached.
# pyodide/ is pinned by package-lock.json; a day (not "immutable") so a version bump still lands.
CACHE_CONTROL = {"pyodide": "public, max-age=86400"}
NO_STORE = "no-store"
# The demo's judge request carries inputs and outputs as base64 (8 tensors of B*S*H*D f32):
# 64 MiB fits e.g. B1 H8 Sq=Sk=2048 D64 (43 MiB) with room to spare, and stops a stray
# upload from filling memory. The page reads the limit from /api/info and refuses bigger.
DEFAULT_MAX_BODY = 64 * 2**20


def content_type(path: Path) -> str:
    known = MIME_TYPES.get(path.suffix.lower())
    return known or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


class HarnessServer(ThreadingHTTPServer):
    daemon_threads = True  # a hung browser connection must not block shutdown
    # socketserver's default listen backlog is 5: with 50 clients connecting at once (each
    # HTTP/1.0 request is a new connection) the accept queue overflowed and some
    # connections were reset (tests/test_server_load.py failed 4 runs in 26 on this
    # 2-core machine; with 128, none in 32). The kernel caps it at net.core.somaxconn.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        routes: dict[str, Path],
        verbose: bool,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        # Resolve once: containment checks compare real paths (symlinks followed).
        self.routes = {name: Path(p).resolve() for name, p in routes.items()}
        self.verbose = verbose
        self.max_body = max_body
        super().__init__(address, HarnessHandler)


class HarnessHandler(BaseHTTPRequestHandler):
    server: HarnessServer
    server_version = "py-harness"

    def do_GET(self) -> None:
        self._serve(send_body=True)

    def do_HEAD(self) -> None:
        self._serve(send_body=False)

    def do_POST(self) -> None:
        if not self.path.startswith("/api/"):
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED)
            return
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():  # chunked or missing: refuse rather than read unbounded
            self.close_connection = True
            self._send_json(HTTPStatus.LENGTH_REQUIRED, "POST needs a Content-Length header")
            return
        if int(length) > self.server.max_body:
            # Answer without reading the body, and close: the rest of it is never read.
            self.close_connection = True
            self._send_json(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"request body is {int(length)} bytes; this server accepts at most "
                f"{self.server.max_body} (start it with python server.py --max-body-mb N)",
            )
            return
        self._api("POST", self.rfile.read(int(length)))

    def _api(self, method: str, body: bytes) -> None:
        path, _, query = self.path.partition("?")
        try:
            from . import api  # NumPy: only the demo's endpoints need it
        except ImportError as exc:
            self._send_json(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"/api/ needs NumPy and py_harness on the server's Python: {exc!r}",
            )
            return
        status, ctype, payload = api.handle(
            method, path, query, body, max_body=self.server.max_body
        )
        self._send_bytes(status, ctype, payload)

    def _send_json(self, status: HTTPStatus, error: str) -> None:
        self._send_bytes(status, "application/json", json.dumps({"error": error}).encode())

    def _send_bytes(self, status: int, ctype: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", NO_STORE)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _serve(self, send_body: bool) -> None:
        # Split off query/fragment by hand: urlsplit would read "//x/..." as a host name.
        raw = self.path.split("?", 1)[0].split("#", 1)[0]
        if raw == "/":
            self._redirect("/web/index.html")
            return
        if raw.startswith("/api/") and send_body:
            self._api("GET", b"")
            return
        status, route, target = self._resolve(raw)
        if target is None:
            self.send_error(status)
            return
        try:
            f = open(target, "rb")  # noqa: SIM115 (closed below, after headers)
        except OSError:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        with f:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", content_type(target))
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.send_header("Cache-Control", CACHE_CONTROL.get(route, NO_STORE))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            # The browser may drop the connection mid-file (navigation, test teardown).
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if send_body:
                    shutil.copyfileobj(f, self.wfile)

    def _resolve(self, raw: str) -> tuple[HTTPStatus, str, Path | None]:
        """Map a request path to a regular file inside its route folder, or an error status."""
        try:
            path = unquote(raw, errors="strict")
        except UnicodeDecodeError:
            return HTTPStatus.BAD_REQUEST, "", None
        # NUL truncates paths in C APIs; a backslash is a separator on Windows.
        if "\0" in path or "\\" in path or not path.startswith("/"):
            return HTTPStatus.FORBIDDEN, "", None
        route, _, rest = path[1:].partition("/")
        base = self.server.routes.get(route)
        if base is None or not rest or rest.endswith("/"):  # directories: no listings
            return HTTPStatus.NOT_FOUND, route, None
        parts = rest.split("/")
        # Decoded before checking, so %2e%2e and ..%2f are caught; empty parts would let
        # "/web//etc/passwd" name an absolute path.
        if any(p in ("", ".", "..") for p in parts):
            return HTTPStatus.FORBIDDEN, route, None
        try:
            target = base.joinpath(*parts).resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            return HTTPStatus.NOT_FOUND, route, None
        if not target.is_relative_to(base):  # symlink leading outside the route folder
            return HTTPStatus.FORBIDDEN, route, None
        if not target.is_file():  # directories: no listings
            return HTTPStatus.NOT_FOUND, route, None
        return HTTPStatus.OK, route, target

    def _redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()


def start_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    routes: dict[str, Path] | None = None,
    verbose: bool = False,
    max_body: int = DEFAULT_MAX_BODY,
) -> tuple[HarnessServer, str]:
    """Serve in a daemon thread; port 0 picks a free port. Returns (server, base_url)."""
    server = HarnessServer((host, port), routes or default_routes(), verbose, max_body)
    # Short poll interval: stop() (shutdown) returns within 50 ms instead of 0.5 s.
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server, _base_url(host, server.server_address[1])


def _base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def stop(server: HarnessServer) -> None:
    """Stop serve_forever and close the listening socket."""
    server.shutdown()
    server.server_close()


def _ensure_built() -> bool:
    try:
        from .build_wheel import build
    except Exception as exc:  # any import failure gets the same advice
        print(f"server: cannot import the wheel builder: {exc!r}", file=sys.stderr)
        return False
    try:
        build()
    except Exception as exc:  # BuildError and tool failures alike
        print(f"server: could not build the py-harness wheel/lock:\n{exc}", file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the browser harness.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 = any free port")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.add_argument("--skip-build", action="store_true", help="serve build/dist/ as it is")
    parser.add_argument(
        "--max-body-mb",
        type=float,
        default=DEFAULT_MAX_BODY / 2**20,
        help="largest POST body accepted by /api/ (MiB; larger gets 413)",
    )
    args = parser.parse_args(argv)

    if not args.skip_build and not _ensure_built():
        print(
            "server: fetch Pyodide with `py-harness setup` (`npm ci` in a checkout), or pass "
            "--skip-build to serve without the wheel.",
            file=sys.stderr,
        )
        return 2
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"server: WARNING: binding {args.host} exposes the tree to the network, and "
            "navigator.gpu needs a secure context (open http://127.0.0.1 or localhost).",
            file=sys.stderr,
        )
    max_body = int(args.max_body_mb * 2**20)
    server = HarnessServer((args.host, args.port), default_routes(), args.verbose, max_body)
    url = _base_url(args.host, server.server_address[1])
    # A wildcard bind is not a URL a browser can use; point at loopback (a secure context).
    if args.host in ("0.0.0.0", "::", ""):
        url = _base_url("127.0.0.1", server.server_address[1])
    print(f"Serving on {url}/  (demo page; test page: {url}/web/harness.html)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
