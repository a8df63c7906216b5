"""One-time downloads and uploads that carry a host's large requests to its pages and
their replies back.

Playwright passes a script's arguments and results as JSON through its own processes: a
43 MB argument (a case's tensors as base64) took 16-19 s here, a 43 MB result 1.3-2.2 s,
where a page fetches the same bytes from a local server in 0.13-0.36 s (docs/runtimes.md,
benchmarks/transport_probe.py). So a session whose page a server in this process serves puts
a large request in that server's exchange and hands the page a URL instead; the page GETs
`/exchange/<token>` once and the body is gone. A case's tensors go the same way as bytes
(`pack`: no base64, no JSON over them), and its outputs come back as one POST of bytes
to a reply slot the session opened for that call (`expect`).

Only this process's sessions put bodies here or open slots, each under a random 192-bit
token; a token that is unknown, taken or filled already is answered 404 like any missing
file, and a slot takes one body of at most the size its session set (413 beyond, before
the body is read). A body the page never fetched, or a slot it never filled (it crashed),
is dropped by its session.
"""

from __future__ import annotations

import secrets
import struct
import threading
from collections.abc import Sequence

from ..gpu.device import Bytes

PREFIX = "/exchange/"
# A frame (pack): u32 text length, u32 blob count, a u32 length per blob, the text (UTF-8,
# padded with spaces to 4 bytes so that each blob starts 4-aligned), then the blobs.
FRAME_ALIGN = 4
FRAME_BLOB_MAX = 2**32 - 1  # a u32 length


class Exchange:
    """Bodies waiting for their one GET, and reply slots for their one POST, by path
    (PREFIX + token)."""

    def __init__(self) -> None:
        self._bodies: dict[str, tuple[bytes, str]] = {}
        self._slots: dict[str, tuple[int, bytes | None]] = {}  # path -> (room, body)
        self._lock = threading.Lock()

    def put(self, body: bytes, content_type: str = "application/json") -> str:
        """Hold `body` for one GET; returns its path."""
        path = PREFIX + secrets.token_urlsafe(24)
        with self._lock:
            self._bodies[path] = (body, content_type)
        return path

    def take(self, path: str) -> tuple[bytes, str] | None:
        """(body, its content type) at `path`, removed; None when there is none (never put,
        or taken)."""
        with self._lock:
            return self._bodies.pop(path, None)

    def waiting(self) -> int:
        """Bodies not yet fetched and reply slots not yet collected."""
        with self._lock:
            return len(self._bodies) + len(self._slots)

    def expect(self, max_bytes: int) -> str:
        """Open a slot for one POSTed body of at most max_bytes; returns its path."""
        path = PREFIX + secrets.token_urlsafe(24)
        with self._lock:
            self._slots[path] = (max_bytes, None)
        return path

    def room(self, path: str) -> int | None:
        """How many bytes the slot at `path` takes; None when there is no empty slot there."""
        with self._lock:
            cap, body = self._slots.get(path, (None, None))
        return cap if body is None else None

    def deliver(self, path: str, body: bytes) -> bool:
        """Fill the empty slot at `path` (False: none there, filled, or body too long)."""
        with self._lock:
            cap, held = self._slots.get(path, (None, None))
            if cap is None or held is not None or len(body) > cap:
                return False
            self._slots[path] = (cap, body)
            return True

    def collect(self, path: str) -> bytes | None:
        """The body POSTed to `path`, and the slot closed; None when it was not filled."""
        with self._lock:
            return self._slots.pop(path, (None, None))[1]


def pack(text: str, blobs: Sequence[Bytes]) -> bytes:
    """A JSON text and blobs as one frame (the module's docstring; web/harness/harness-core.mjs
    reads and writes the same)."""
    raw = text.encode()
    for i, blob in enumerate(blobs):
        if len(blob) > FRAME_BLOB_MAX:
            raise ValueError(
                f"blob {i} has {len(blob)} bytes; a frame holds at most {FRAME_BLOB_MAX} per "
                "blob (its length is a u32)"
            )
    pad = -(8 + 4 * len(blobs) + len(raw)) % FRAME_ALIGN
    sizes = (len(b) for b in blobs)
    head = struct.pack(f"<{2 + len(blobs)}I", len(raw) + pad, len(blobs), *sizes)
    return b"".join([head, raw, b" " * pad, *blobs])


def unpack(body: Bytes) -> tuple[str, list[memoryview]]:
    """pack's inverse: (text, blobs as views of body); ValueError when body is no frame."""
    view = memoryview(body).cast("B")
    if len(view) < 8:
        raise ValueError(f"a frame has at least 8 bytes, got {len(view)}")
    text_len, count = struct.unpack_from("<2I", view)
    at = 8 + 4 * count
    if at > len(view):
        raise ValueError(f"a frame of {len(view)} bytes cannot list {count} blobs")
    sizes = struct.unpack_from(f"<{count}I", view, 8)
    if at + text_len + sum(sizes) != len(view):
        raise ValueError(
            f"a frame of {len(view)} bytes does not hold its {text_len}-byte text and "
            f"{count} blobs of {sum(sizes)} bytes"
        )
    text = bytes(view[at : at + text_len]).decode()
    blobs, at = [], at + text_len
    for size in sizes:
        blobs.append(view[at : at + size])
        at += size
    return text, blobs


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
