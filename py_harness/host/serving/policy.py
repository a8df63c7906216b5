"""What a request may ask, judged from its head alone: Host, method, framing, size, type,
origin (docs/serving.md has the table). server.py asks check_head before reading a body."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import h11

from ..exchange import PREFIX as EXCHANGE_PREFIX
from .limits import Limits
from .static import NO_STORE

MAX_TARGET = 8192  # request line's target, bytes (414 beyond)
MAX_HEAD = 64 * 2**10  # the whole header block, bytes (431 beyond)
MAX_HEADERS = 100
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
# 'wasm-unsafe-eval': Pyodide compiles its WebAssembly; nothing else is inline or remote.
CSP = (
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; "
    "worker-src 'self' blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
SECURITY_HEADERS = [
    (b"X-Content-Type-Options", b"nosniff"),
    (b"Content-Security-Policy", CSP.encode()),
    (b"Referrer-Policy", b"no-referrer"),
]
ALLOWED_METHODS = b"GET, HEAD, POST"
KNOWN_METHODS = {b"OPTIONS", b"PUT", b"DELETE", b"PATCH", b"TRACE", b"CONNECT"}
# POST bodies: JSON in UTF-8 (json.loads would guess other encodings; the page sends UTF-8).
JSON_TYPES = (b"application/json", b"application/json; charset=utf-8")
# POST bodies to a session's reply slot (host/exchange.py): its frame of bytes.
FRAME_TYPES = (b"application/octet-stream",)


@dataclass
class Reply:
    """One answer: a JSON body unless content_type says otherwise; close ends the connection."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    cache: str = NO_STORE
    close: bool = False


def error(
    status: int,
    message: str,
    *,
    close: bool = False,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> Reply:
    """The one shape of every refusal: {"error": message} as JSON, never a traceback."""
    body = json.dumps({"error": message}).encode()
    return Reply(status, body, headers=headers or [], close=close)


# Each /api/ endpoint's method; a GET endpoint answers HEAD too (the server sends no body).
METHODS = {
    "/api/info": "GET",
    "/api/cases": "GET",
    "/api/inputs": "GET",
    "/api/judge": "POST",
    "/api/judge_case": "POST",
}
# The endpoints that compute a float64 reference: the server runs one at a time, and reads
# a body for one only once its turn has come.
COSTLY = frozenset({"/api/judge", "/api/judge_case"})


# A body this small is read before a refusal; a larger one is refused unread, and closed.
SMALL_BODY = 64 << 10


def allowed(path: str) -> bytes:
    """The Allow header of a 405 at an /api/ path."""
    return b"GET, HEAD" if METHODS.get(path) == "GET" else b"POST"


def check_head(
    request: h11.Request,
    allowed_hosts: frozenset[str],
    limits: Limits,
    reply_room: Callable[[str], int | None] = lambda _path: None,
) -> Reply | None:
    """A refusal for anything wrong with the request's head, or None. reply_room: the
    bytes an /exchange/ reply slot takes at a path (None: no empty slot there)."""
    if request.http_version not in (b"1.0", b"1.1"):
        return error(
            505,
            f"HTTP/{request.http_version.decode('latin-1')[:10]} is not served; use HTTP/1.1",
            close=True,
        )
    if len(request.target) > MAX_TARGET:
        return error(414, f"request target over {MAX_TARGET} bytes", close=True)
    if len(request.headers) > MAX_HEADERS:
        return error(431, f"more than {MAX_HEADERS} header fields", close=True)
    if sum(len(k) + len(v) + 4 for k, v in request.headers) > MAX_HEAD:
        return error(431, f"header block over {MAX_HEAD} bytes", close=True)
    headers: dict[bytes, list[bytes]] = {}
    for k, v in request.headers:
        headers.setdefault(k, []).append(v)
    hosts = headers.get(b"host", [])
    if len(hosts) != 1 or host_name(hosts[0]) not in allowed_hosts:
        shown = hosts[0].decode("latin-1")[:100] if hosts else "(none)"
        allowed = ", ".join(sorted(allowed_hosts))
        return error(
            400,
            f"Host {shown!r} is not served here; allowed: {allowed} "
            "(py-harness serve --allow-host NAME)",
            close=True,
        )
    has_body = b"transfer-encoding" in headers or headers.get(b"content-length", [b"0"]) != [b"0"]
    method = request.method
    if method in KNOWN_METHODS:
        return error(
            405,
            f"{method.decode()} is not served; use GET, HEAD or POST",
            close=True,
            headers=[(b"Allow", ALLOWED_METHODS)],
        )
    if method not in (b"GET", b"HEAD", b"POST"):
        return error(
            501, f"method {method.decode('latin-1')[:40]!r} is not implemented", close=True
        )
    if method != b"POST":
        return error(400, f"{method.decode()} takes no body", close=True) if has_body else None
    to_slot = request.target.startswith(EXCHANGE_PREFIX.encode())
    if not (request.target.startswith(b"/api/") or to_slot):
        return error(
            405,
            "POST is only for /api/ (and a session's reply slots)",
            close=True,
            headers=[(b"Allow", b"GET, HEAD")],
        )
    if b"transfer-encoding" in headers or b"content-length" not in headers:
        return error(411, "POST needs a Content-Length header (no chunked bodies)", close=True)
    length = int(headers[b"content-length"][0])  # h11 checked: ASCII digits, at most 20
    path = request.target.split(b"?", 1)[0].decode("ascii", "replace")
    if not to_slot and METHODS.get(path) != "POST" and length > SMALL_BODY:
        # Refused before its body is read (a small one is read and dropped first: closing
        # with unread bytes would reset the connection under the answer).
        if path not in METHODS:
            return error(404, f"no endpoint {path[:200]}; known: {', '.join(METHODS)}", close=True)
        return error(
            405, f"{path} takes GET, not POST", close=True, headers=[(b"Allow", allowed(path))]
        )
    if to_slot:
        room = reply_room(request.target.decode("ascii", "replace"))
        if room is None:
            return error(404, "Not Found: no reply is awaited here", close=True)
        limit, flag, types = room, "(this call's reply)", FRAME_TYPES
    else:
        limit, flag, types = limits.max_body, "(py-harness serve --max-body-mb N)", JSON_TYPES
    if length > limit:
        # Answered without reading the body, and closed: the rest of it is never read.
        return error(
            413,
            f"request body is {length} bytes; this server accepts at most {limit} {flag}",
            close=True,
        )
    ctype = headers.get(b"content-type", [b""])[0].lower().replace(b" ", b"")
    if ctype.replace(b";charset=", b"; charset=").replace(b'"', b"") not in types:
        want = types[0].decode()
        return error(415, f"POST bodies here must be Content-Type: {want}", close=True)
    origin = headers.get(b"origin")
    if origin and origin_host(origin[0]) not in allowed_hosts:
        return error(
            403, f"Origin {origin[0].decode('latin-1')[:100]!r} may not POST here", close=True
        )
    return None


def host_name(value: bytes) -> str:
    """The name in a Host header ("[::1]:8000" -> "::1"), lower case; "" if malformed."""
    text = value.decode("latin-1").strip().lower()
    if text.startswith("["):
        name, sep, rest = text[1:].partition("]")
        return (
            name
            if sep and (not rest or (rest[0] == ":" and rest[1:].isascii() and rest[1:].isdigit()))
            else ""
        )
    name, _, port = text.partition(":")
    return name if not port or (port.isascii() and port.isdigit()) else ""


def origin_host(value: bytes) -> str:
    """The host name of an Origin header ("http://127.0.0.1:8000" -> "127.0.0.1")."""
    scheme, sep, rest = value.partition(b"://")
    return host_name(rest) if sep and scheme in (b"http", b"https") else ""
