"""Slow clients against the server (issue 15, finding 5; docs/serving.md):
header block and body due within --timeout of a request's first byte (or the connection's
start); trickling or stalled requests get 408 JSON and are closed, idle connections are closed
silently, and nobody else waits meanwhile. Runs with timeout=2 s, so each test takes ~3-6 s.
"""

from __future__ import annotations

import http.client
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from py_harness.host.serving import server
from tests.hostile import (
    address,
    error_body_problems,
    exchange,
    parse,
    request_bytes,
    security_header_problems,
    start,
)

TIMEOUT = 2.0
CLOSED_AFTER = (1.5, 4.0)  # seconds after connecting: within the timeout's reach, not held
TRICKLING = 20
IDLE = 20
FAST_LIMIT = 1.0  # other clients' requests meanwhile


@pytest.fixture(scope="module")
def slow_server() -> Iterator[tuple[tuple[str, int], list[str]]]:
    srv, url, dropped = start(timeout=TIMEOUT, max_body=2**20)
    yield address(url), dropped
    server.stop(srv)


@dataclass
class Slow:
    sock: socket.socket
    trickle: bytes  # sent a byte at a time (b"": an idle client that sends nothing)
    t0: float
    sent: int = 0
    got: bytes = b""
    closed_at: float | None = None
    events: list[str] = field(default_factory=list)


def hold_slow_clients(
    addr: tuple[str, int], clients: list[bytes], *, seconds: float, step: float = 0.1
) -> list[Slow]:
    """Connect every client, then for up to `seconds` send one byte of each trickle per step
    and read whatever comes back, noting when each connection is closed. One thread."""
    sel = selectors.DefaultSelector()
    slow = []
    for data in clients:
        sock = socket.create_connection(addr, timeout=5)
        sock.setblocking(False)
        s = Slow(sock, data, time.monotonic())
        sel.register(sock, selectors.EVENT_READ, s)
        slow.append(s)
    end = time.monotonic() + seconds
    next_send = time.monotonic()
    try:
        while time.monotonic() < end and any(s.closed_at is None for s in slow):
            now = time.monotonic()
            if now >= next_send:
                next_send = now + step
                for s in slow:
                    if s.closed_at is None and s.sent < len(s.trickle):
                        try:
                            s.sock.send(s.trickle[s.sent : s.sent + 1])
                            s.sent += 1
                        except OSError as exc:
                            s.events.append(f"send: {exc!r}")
            for key, _ in sel.select(timeout=max(0.0, min(next_send, end) - time.monotonic())):
                s = key.data
                try:
                    chunk = s.sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError as exc:  # a reset ends it too
                    s.events.append(f"recv: {exc!r}")
                    chunk = b""
                if chunk:
                    s.got += chunk
                else:
                    s.closed_at = time.monotonic() - s.t0
                    sel.unregister(s.sock)
    finally:
        for s in slow:
            s.sock.close()
        sel.close()
    return slow


def trickle_request(host: str) -> bytes:
    # A header block that never ends: one more header byte every step.
    return f"GET /demo/index.html HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode() + b"a" * 500


def test_slow_and_idle_clients_are_closed_and_others_answered(
    slow_server: tuple[tuple[str, int], list[str]],
) -> None:
    addr, dropped = slow_server
    host = f"127.0.0.1:{addr[1]}"
    threads_before = threading.active_count()
    result: list[list[Slow]] = []
    holder = threading.Thread(
        target=lambda: result.append(
            hold_slow_clients(addr, [trickle_request(host)] * TRICKLING + [b""] * IDLE, seconds=6.0)
        )
    )
    holder.start()
    time.sleep(0.3)  # all 40 connected and started
    # Meanwhile: other clients, each on a fresh connection, answered within a second.
    timings: list[tuple[str, float, int]] = []
    most_threads = 0
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        for path in ("/demo/index.html", "/api/info"):
            t0 = time.monotonic()
            conn = http.client.HTTPConnection(*addr, timeout=5)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                timings.append((path, time.monotonic() - t0, resp.status))
            except OSError as exc:
                timings.append((f"{path} {exc!r}", time.monotonic() - t0, 0))
            finally:
                conn.close()
        # The holder thread is ours; the server's extra threads are what slow clients cost.
        most_threads = max(most_threads, threading.active_count() - 1)
        time.sleep(0.2)
    holder.join(10)
    slow = result[0]
    trickling, idle = slow[:TRICKLING], slow[TRICKLING:]
    lo, hi = CLOSED_AFTER

    slowest = max(timings, key=lambda t: t[1])
    print(
        f"\n{len(slow)} slow clients; trickling closed at "
        f"{sorted(round(s.closed_at or -1, 2) for s in trickling)}; idle closed at "
        f"{sorted(round(s.closed_at or -1, 2) for s in idle)}; {len(timings)} other requests, "
        f"slowest {slowest[1]:.2f} s; threads {threads_before} -> {most_threads}"
    )
    assert all(status == 200 for _, _, status in timings), timings
    assert slowest[1] < FAST_LIMIT, f"another client waited {slowest[1]:.2f} s: {slowest}"
    never = [i for i, s in enumerate(slow) if s.closed_at is None]
    assert not never, f"{len(never)} slow clients still held after 6 s (dropped: {dropped})"
    early_late = [
        (i, round(s.closed_at, 2)) for i, s in enumerate(slow) if not lo <= s.closed_at <= hi
    ]  # type: ignore[operator]
    assert not early_late, f"closed outside {CLOSED_AFTER} s: {early_late}"
    for s in trickling:
        reply, complete = parse(s.got)
        assert complete and reply.status == 408, (s.got[:300], s.events)
        assert not error_body_problems(reply), s.got[:300]
        assert not security_header_problems(reply), s.got[:300]
    assert all(s.got == b"" for s in idle), [s.got[:100] for s in idle if s.got]
    assert most_threads <= threads_before + 4, (
        f"slow clients hold threads: {threads_before} -> {most_threads}"
    )


def test_stalled_body_gets_408(slow_server: tuple[tuple[str, int], list[str]]) -> None:
    """Headers complete, 10 of 100 body bytes, then nothing: 408 at the timeout."""
    addr, _ = slow_server
    data = (
        request_bytes(
            "POST",
            "/api/judge",
            f"127.0.0.1:{addr[1]}",
            [("Content-Type", "application/json"), ("Content-Length", "100")],
            content_length=False,
        )
        + b'{"config":'
    )
    reply = exchange(addr, data, timeout=6.0, wait_close=1.0)
    lo, hi = CLOSED_AFTER
    assert reply.status == 408, reply.describe()
    assert lo <= reply.seconds <= hi, reply.describe()
    assert reply.eof, "connection not closed after the 408"
    assert not error_body_problems(reply) and not security_header_problems(reply)


def test_trickled_body_gets_408(slow_server: tuple[tuple[str, int], list[str]]) -> None:
    """A body sent a byte at a time, never fast enough: the deadline counts from the
    request's first byte, so steady trickling does not extend it."""
    addr, _ = slow_server
    head = request_bytes(
        "POST",
        "/api/judge",
        f"127.0.0.1:{addr[1]}",
        [("Content-Type", "application/json"), ("Content-Length", "1000")],
        content_length=False,
    )
    slow = hold_slow_clients(addr, [head + b" " * 1000], seconds=6.0, step=0.01)
    # ~1100 bytes at 10 ms a byte: ~11 s to send; the server must cut in at ~2 s.
    s = slow[0]
    reply, complete = parse(s.got)
    assert complete and reply.status == 408, (s.got[:300], s.events)
    lo, hi = CLOSED_AFTER
    assert s.closed_at is not None and lo <= s.closed_at <= hi, s.closed_at


def test_idle_keepalive_connection_is_closed(
    slow_server: tuple[tuple[str, int], list[str]],
) -> None:
    """After a complete response on a kept-alive connection, silence is closed too."""
    addr, _ = slow_server
    data = (
        f"GET /demo/index.html HTTP/1.1\r\nHost: 127.0.0.1:{addr[1]}\r\n\r\n".encode()
    )  # no Connection: close
    t0 = time.monotonic()
    with socket.create_connection(addr, timeout=6) as sock:
        sock.sendall(data)
        got, closed = b"", None
        while time.monotonic() - t0 < 6:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                closed = time.monotonic() - t0
                break
            got += chunk
    reply, complete = parse(got)
    assert complete and reply.status == 200, got[:300]
    assert closed is not None, "kept-alive idle connection still open after 6 s"
    assert closed <= CLOSED_AFTER[1], closed


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_clients_that_never_read_hold_a_chunk_each_not_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Twenty clients ask for a 16 MiB file and read nothing: before, each held its own copy
    # of the file in the server's send buffer (20 x 16 MiB); now they share one copy and
    # each holds a chunk, and each is cut off once it takes no chunk within the timeout.
    (tmp_path / "big.whl").write_bytes(bytes(range(256)) * (16 << 12))
    srv, url = server.start_server(routes={"dist": tmp_path}, timeout=TIMEOUT)
    try:
        addr = address(url)
        before = _rss_mib()
        socks = []
        for _ in range(20):
            s = socket.create_connection(addr)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(f"GET /dist/big.whl HTTP/1.1\r\nHost: {addr[0]}\r\n\r\n".encode())
            socks.append(s)
        time.sleep(1.0)
        grown = _rss_mib() - before
        assert grown < 100, f"server memory grew {grown:.0f} MiB for 20 stalled clients"
        time.sleep(TIMEOUT * 2)  # past the timeout: every stalled connection is cut off
        assert srv._open == 0, f"{srv._open} stalled connections still held"
        for s in socks:
            s.close()
    finally:
        server.stop(srv)
