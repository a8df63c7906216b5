"""The pages' HTTP server: asyncio for the connections, h11 for the protocol. Its command
line (`python server.py`, `py-harness serve`) is serve.py.

Routes: /harness/, /demo/, /shaders/, /pyodide/, /dist/ (static.py: only the files the pages
load); /api/ (api.py: the demo page's NumPy side); /exchange/ (host/exchange.py: large
requests from this process's sessions to their pages, each fetched once, and the pages'
replies, each POSTed once to a slot its session opened); / redirects to /demo/index.html.

Why not http.server: it holds a thread per connection with no deadline (20 slow and 20 idle
clients each held one for 30 s), took Content-Length through str.isdigit ("²" raised) and
closed connections without an answer. h11 parses strictly (Content-Length is ASCII digits, at
most 20; one Host; no bare LF) and leaves the I/O to us: an asyncio task per connection costs
no thread, and every wait has a deadline. docs/serving.md has the measurements and the
alternatives tried.

What a request may ask is policy.py's (check_head, on the head alone); what it may cost,
limits.py's. Every answer, errors included, is JSON or a file, with nosniff, a
Content-Security-Policy and no-referrer. Errors never carry a traceback: a harness bug is
logged here and answered 500. Tests use ``start_server()`` / ``stop()``.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import traceback
from http import HTTPStatus
from pathlib import Path

import h11

from .. import exchange
from .limits import (
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_REFERENCE_MB,
    DEFAULT_MAX_REFERENCE_SECONDS,
    DEFAULT_TIMEOUT,
    Limits,
)
from .policy import (
    COSTLY,
    LOOPBACK_NAMES,
    MAX_HEAD,
    MAX_TARGET,
    SECURITY_HEADERS,
    SMALL_BODY,
    Reply,
    allowed,
    check_head,
    error,
)
from .static import CACHE_CONTROL, NO_STORE, content_type, default_routes, resolve

READ_CHUNK = 64 * 2**10
# One reference at a time (each can take a core and hundreds of MB); a second request
# waits this long for it, then gets 503 with Retry-After.
REFERENCE_WAIT = 2.0


class _Refused(Exception):
    """A request answered with `reply` before its body is read."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply


class HarnessServer:
    """Listens on construction (so a busy port fails here, and port 0 is known at once);
    serve_forever() runs the event loop in the calling thread until shutdown()."""

    def __init__(
        self,
        address: tuple[str, int],
        routes: dict[str, Path] | None = None,
        verbose: bool = False,
        limits: Limits | None = None,
        allow_hosts: tuple[str, ...] = (),
    ) -> None:
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=128)
        self.server_address = self.socket.getsockname()[:2]
        # Resolve once: containment checks compare real paths (symlinks followed).
        self.routes = {n: Path(p).resolve() for n, p in (routes or default_routes()).items()}
        self.verbose = verbose
        self.limits = limits or Limits()
        names = {*LOOPBACK_NAMES, *(h.lower() for h in allow_hosts)}
        if host not in ("", "0.0.0.0", "::"):
            names.add(host.lower())
        self.allowed_hosts = frozenset(names)
        self.exchange = exchange.Exchange()
        self._files = FileCache()
        self.loop = asyncio.new_event_loop()
        self._stopped = threading.Event()
        self.serving = threading.Event()  # set once connections are accepted
        self._stop: asyncio.Event | None = None

    @property
    def max_body(self) -> int:
        return self.limits.max_body

    def serve_forever(self) -> None:
        try:
            self.loop.run_until_complete(self._serve())
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        if self._stop is not None and not self._stopped.is_set():
            self.loop.call_soon_threadsafe(self._stop.set)
            self._stopped.wait(5)

    def server_close(self) -> None:
        self.socket.close()
        if not self.loop.is_running():
            self.loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._reference = asyncio.Semaphore(1)
        self._open = 0  # connections being served
        srv = await asyncio.start_server(self._connection, sock=self.socket)
        self.serving.set()
        async with srv:
            await self._stop.wait()
            srv.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

    # ---- one connection: requests until close, error or deadline ------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= MAX_CONNECTIONS:  # each holds buffers: their number is bounded
            writer.transport.abort()
            return
        self._open += 1
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            while await self._exchange(conn, reader, writer):
                conn.start_next_cycle()
        except TimeoutError:  # stopped reading: close() would wait for it to drain
            writer.transport.abort()
        except (ConnectionError, asyncio.CancelledError, h11.LocalProtocolError):
            pass  # the client left, or the server is stopping
        finally:
            self._open -= 1
            writer.close()

    async def _exchange(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Read one request, answer it; True to keep the connection for the next one."""
        deadline = self.loop.time() + self.limits.timeout
        started = bytearray()  # the request's first bytes: is a too-long head its target?
        try:
            request = await self._next(conn, reader, deadline, started)
            if request is None:
                return False
            reply = check_head(request, self.allowed_hosts, self.limits, self.exchange.room)
            if reply is None:
                reply = await self._answer(conn, reader, writer, request, deadline)
        except h11.RemoteProtocolError as exc:
            status = exc.error_status_hint
            if status == 431 and b"\n" not in started[: MAX_TARGET + 64]:
                status = 414
            reply = error(status, f"malformed request: {exc}", close=True)
            request = None
        except _Refused as exc:
            reply, request = exc.reply, None
        head = request is not None and request.method == b"HEAD"
        await self._send(conn, writer, reply, head)
        if self.verbose and request is not None:
            print(
                f"{request.method.decode()} {request.target.decode()} {reply.status}",
                file=sys.stderr,
            )
        return not reply.close and conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _answer(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        deadline: float,
    ) -> Reply:
        """Read the body (also for GET and HEAD, whose bodies check_head refused: h11 must
        see the request's end before the connection carries the next one) and answer. A
        costly endpoint's body is read only once its turn has come: one in memory at a time."""
        path = request.target.split(b"?", 1)[0].decode("ascii", "replace")
        if request.method != b"POST" or path not in COSTLY:
            return await self._route(request, await self._body(conn, reader, writer, deadline))
        try:
            await asyncio.wait_for(self._reference.acquire(), REFERENCE_WAIT)
        except TimeoutError:
            small = int(dict(request.headers).get(b"content-length", b"0")) <= SMALL_BODY
            if small:  # read and dropped: closing on unread bytes resets the connection
                await self._body(conn, reader, writer, deadline)
            return error(
                503,
                "the server is computing another reference; try again shortly",
                headers=[(b"Retry-After", b"2")],
                close=not small,  # a large body is left unread
            )
        try:
            return await self._route(request, await self._body(conn, reader, writer, deadline))
        finally:
            self._reference.release()

    async def _read(self, reader: asyncio.StreamReader, deadline: float) -> bytes | None:
        try:
            return await asyncio.wait_for(reader.read(READ_CHUNK), deadline - self.loop.time())
        except TimeoutError:
            return None

    async def _next(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        deadline: float,
        started: bytearray,
    ) -> h11.Request | None:
        """The next request's head, or None when the client closed or stayed silent."""
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Request):
                return event
            if event is not h11.NEED_DATA:  # ConnectionClosed, or PAUSED
                return None
            data = await self._read(reader, deadline)
            if data is None:  # deadline: a partial request is told so, silence is not
                if started:
                    raise _Refused(self._timeout_reply())
                return None
            if len(started) <= MAX_TARGET + 64:
                started += data[: MAX_TARGET + 64]
            conn.receive_data(data)

    async def _body(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        deadline: float,
    ) -> bytes:
        if conn.they_are_waiting_for_100_continue:  # curl asks before bodies over 1 KiB
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        chunks = []
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Data):
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            elif event is h11.NEED_DATA:
                data = await self._read(reader, deadline)
                if data is None:
                    raise _Refused(self._timeout_reply())
                conn.receive_data(data)
            else:
                raise _Refused(
                    error(400, "the connection closed before the body was complete", close=True)
                )

    def _timeout_reply(self) -> Reply:
        return error(
            HTTPStatus.REQUEST_TIMEOUT,
            f"the request did not arrive within {self.limits.timeout:g} s "
            "(py-harness serve --timeout S)",
            close=True,
        )

    # ---- answers ------------------------------------------------------------------------------

    async def _route(self, request: h11.Request, body: bytes) -> Reply:
        target = request.target.decode("ascii", "replace")
        raw, _, query = target.partition("?")
        raw = raw.split("#", 1)[0]
        if raw == "/":
            return Reply(
                302, headers=[(b"Location", b"/demo/index.html")], content_type="text/plain"
            )
        if raw.startswith("/api/"):
            return await self._api(request.method.decode(), raw, query, body)
        if raw.startswith(exchange.PREFIX):
            if request.method == b"POST":  # check_head found an empty slot of room enough
                if not self.exchange.deliver(raw, body):
                    return error(404, f"Not Found: {raw[:200]}")  # filled meanwhile
                return Reply(200, b'{"received": %d}' % len(body))
            # HEAD must not use up the one GET.
            if request.method == b"HEAD":
                return error(405, "HEAD is not served here", headers=[(b"Allow", b"GET")])
            held = self.exchange.take(raw)
            if held is None:
                return error(404, f"Not Found: {raw[:200]}")
            return Reply(200, *held)
        status, route, path = resolve(self.routes, raw)
        if path is None:
            return error(status, f"{HTTPStatus(status).phrase}: {raw[:200]}")
        try:
            data = await self.loop.run_in_executor(None, self._files.read, path)
        except OSError:
            return error(404, f"Not Found: {raw[:200]}")
        return Reply(200, data, content_type(path), cache=CACHE_CONTROL.get(route, NO_STORE))

    async def _api(self, method: str, path: str, query: str, body: bytes) -> Reply:
        try:
            from . import api  # NumPy: only the demo's endpoints need it
        except ImportError as exc:
            return error(503, f"/api/ needs NumPy and py_harness on the server's Python: {exc!r}")

        def call() -> Reply:
            try:
                status, payload = api.handle(method, path, query, body, limits=self.limits)
            except Exception:  # a harness bug: logged here, never sent to the page
                traceback.print_exc(file=sys.stderr)
                return error(500, "the server failed on this request (its log has the traceback)")
            if status == HTTPStatus.METHOD_NOT_ALLOWED:
                return Reply(status, payload, headers=[(b"Allow", allowed(path))])
            return Reply(status, payload)

        return await self.loop.run_in_executor(None, call)  # COSTLY ones hold the turn

    async def _send(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, reply: Reply, head: bool
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            reply.close = True
            return
        headers = [
            (b"Content-Type", reply.content_type.encode()),
            (b"Content-Length", str(len(reply.body)).encode()),
            (b"Cache-Control", reply.cache.encode()),
            *SECURITY_HEADERS,
            *reply.headers,
        ]
        if reply.close:
            headers.append((b"Connection", b"close"))
        reason = HTTPStatus(reply.status).phrase.encode()
        writer.write(
            conn.send(h11.Response(status_code=reply.status, headers=headers, reason=reason))
        )
        # The body in chunks, each waiting for the client to take the one before: a client
        # that stops reading holds a chunk of the server's memory, not the whole body, and
        # one that takes no chunk within the timeout is cut off (_connection aborts).
        body = memoryview(reply.body if not head else b"")
        for at in range(0, len(body), SEND_CHUNK):
            writer.write(conn.send(h11.Data(data=body[at : at + SEND_CHUNK])))
            await asyncio.wait_for(writer.drain(), self.limits.timeout)
        writer.write(conn.send(h11.EndOfMessage()))
        await asyncio.wait_for(writer.drain(), self.limits.timeout)


# Bytes written before waiting for the client to take them (_send).
SEND_CHUNK = 256 << 10
# Connections served at once; more are closed at once (each holds up to a chunk or two).
MAX_CONNECTIONS = 256


class FileCache:
    """The served files' bytes, one copy each, read again when a file changes: forty
    clients asking for the same 31 MB snapshot share it."""

    def __init__(self) -> None:
        self._held: dict[Path, tuple[tuple[int, int], bytes]] = {}
        self._lock = threading.Lock()

    def read(self, path: Path) -> bytes:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            held = self._held.get(path)
            if held is not None and held[0] == stamp:
                return held[1]
        data = path.read_bytes()
        with self._lock:
            self._held[path] = (stamp, data)
        return data


def start_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    routes: dict[str, Path] | None = None,
    verbose: bool = False,
    max_body: int = DEFAULT_MAX_BODY,
    timeout: float = DEFAULT_TIMEOUT,
    max_reference_mb: float = DEFAULT_MAX_REFERENCE_MB,
    max_reference_seconds: float = DEFAULT_MAX_REFERENCE_SECONDS,
    allow_hosts: tuple[str, ...] = (),
) -> tuple[HarnessServer, str]:
    """Serve in a daemon thread; port 0 picks a free port. Returns (server, base_url)."""
    limits = Limits(max_body, timeout, int(max_reference_mb * 2**20), max_reference_seconds)
    server = HarnessServer((host, port), routes, verbose, limits, allow_hosts)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # A stop() before the loop took the socket would close it under the loop's feet.
    server.serving.wait(5)
    url = base_url(host, server.server_address[1])
    exchange.register(url, server.exchange)
    return server, url


def base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def stop(server: HarnessServer) -> None:
    """Stop serving, close every connection and the listening socket."""
    exchange.unregister(server.exchange)
    server.shutdown()
    server.server_close()
