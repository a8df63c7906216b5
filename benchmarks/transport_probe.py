"""What moving a case's bytes between the host and a Chromium page costs, by each way.

A run_case request carries the tensors as base64 JSON: 43 MB for the d64-sq4096 case. This
times 43 MB of text as a Playwright argument and as a return value, and 32 MB of bytes
fetched from a local HTTP server and posted back (as a typed array and as a Blob):

    python3 benchmarks/transport_probe.py [--mb 43]

Measured figures and what the harness does about them: docs/runtimes.md.
"""

from __future__ import annotations

import argparse
import http.server
import threading
import time

from playwright.sync_api import sync_playwright

from py_harness.host.runtimes.chromium import chromium_launch_args


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        data = b"<!doctype html>" if self.path == "/" else self.body
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if self.path == "/" else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _timed(label: str, fn: object) -> None:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    print(f"{label:42s} {time.perf_counter() - t0:7.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=43, help="megabytes moved each way")
    n = ap.parse_args().mb << 20
    _Handler.body = b"A" * n
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}/"
    with sync_playwright() as p:
        browser = p.chromium.launch(**chromium_launch_args())
        page = browser.new_page()
        page.goto(url)
        text = "A" * n
        _timed("Playwright argument (host -> page)", lambda: page.evaluate("(s) => s.length", text))
        _timed(
            "Playwright return value (page -> host)",
            lambda: page.evaluate("(n) => 'B'.repeat(n)", n),
        )
        fetch = "async (u) => (await (await fetch(u)).text()).length"
        _timed(
            "fetch from a local server (host -> page)", lambda: page.evaluate(fetch, url + "body")
        )
        for body in ("a", "new Blob([a])"):
            post = (
                "async ([u, n]) => { const a = new Uint8Array(n);"
                f" return (await fetch(u, {{method: 'POST', body: {body}}})).status }}"
            )
            _timed(
                f"POST body {body} (page -> host)",
                lambda post=post: page.evaluate(post, [url + "up", n]),
            )
        browser.close()
    srv.shutdown()


if __name__ == "__main__":
    main()
