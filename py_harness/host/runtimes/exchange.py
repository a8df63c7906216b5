"""One-time downloads that carry a host's large requests to its pages.

Playwright passes a script's arguments as JSON through its own processes: a 43 MB
argument (a case's tensors as base64) took 16-19 s here, where a page fetches the same
bytes from a local server in 0.13-0.36 s (docs/runtimes.md, scripts/transport_probe.py).
So a session whose page a server in this process serves puts a large request in that
server's exchange and hands the page a URL instead; the page GETs `/exchange/<token>`
once and the body is gone.

Nothing can be uploaded: only this process's sessions put bodies here, each under a
random 192-bit token, and a token that is unknown or taken already is answered 404 like
any missing file. A body the page never fetched (it crashed) is dropped by its session.
"""

from __future__ import annotations

import secrets
import threading

PREFIX = "/exchange/"


class Exchange:
    """Bodies waiting for their one GET, by path (PREFIX + token)."""

    def __init__(self) -> None:
        self._bodies: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, body: bytes) -> str:
        """Hold `body` for one GET; returns its path."""
        path = PREFIX + secrets.token_urlsafe(24)
        with self._lock:
            self._bodies[path] = body
        return path

    def take(self, path: str) -> bytes | None:
        """The body at `path`, removed; None when there is none (never put, or taken)."""
        with self._lock:
            return self._bodies.pop(path, None)

    def waiting(self) -> int:
        with self._lock:
            return len(self._bodies)


# The exchange of each server running in this process, by its base URL: sessions know
# their pages' base URL only. A page served by another process has none here.
_BY_URL: dict[str, Exchange] = {}


def register(base_url: str, exchange: Exchange) -> None:
    _BY_URL[base_url] = exchange


def unregister(exchange: Exchange) -> None:
    for url in [u for u, e in _BY_URL.items() if e is exchange]:
        del _BY_URL[url]


def for_url(base_url: str) -> Exchange | None:
    """The exchange of the server at base_url when this process runs it, else None."""
    return _BY_URL.get(base_url)
