"""Raw-socket HTTP for the server's hostile-input tests (test_server_hostile.py,
test_server_slow_clients.py): send bytes as they are, read one response back, and check
what every response must carry (docs/serving.md).

Only 127.0.0.1; every read is bounded by a timeout.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py_harness.host.serving import server

REPO = Path(__file__).resolve().parents[1]
MiB = 2**20
CSP_PARTS = ("default-src 'self'", "object-src 'none'", "frame-ancestors 'none'")
# A traceback or a server-side file path in a body: what the contract forbids.
LEAKS = re.compile(
    rb'Traceback|File "|\.py", line \d+|site-packages|' + re.escape(str(REPO).encode())
)


@dataclass
class Reply:
    """One response read off a socket (status None: the connection ended without one)."""

    status: int | None = None
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    raw: bytes = b""
    eof: bool = False  # the server closed the connection (after the response, if any)
    seconds: float = 0.0  # from connect to the end of the response (or of the wait)
    error: str = ""  # why reading stopped early (a timeout, a reset)

    def json(self) -> Any:
        return json.loads(self.body)

    def describe(self) -> str:
        head = self.raw.split(b"\r\n\r\n", 1)[0][:300]
        return (
            f"status={self.status} eof={self.eof} {self.seconds:.2f}s {self.error} "
            f"head={head!r} body={self.body[:300]!r}"
        )


def address(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    return host.strip("[]"), int(port)


def parse(raw: bytes, head_request: bool = False) -> tuple[Reply, bool]:
    """(reply so far, whether the response is complete)."""
    reply = Reply(raw=raw)
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        return reply, False
    lines = raw[:end].decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3}) ?(.*)", lines[0])
    if not m:
        return reply, False
    reply.status, reply.reason = int(m.group(1)), m.group(2)
    for line in lines[1:]:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        # Repeated headers joined as a list would be (enough for the checks here).
        value = value.strip()
        reply.headers[key] = f"{reply.headers[key]}, {value}" if key in reply.headers else value
    body = raw[end + 4 :]
    if head_request or reply.status in (204, 304) or 100 <= reply.status < 200:
        reply.body = b""
        return reply, True
    length = reply.headers.get("content-length")
    if length is not None and length.isdigit():
        reply.body = body[: int(length)]
        return reply, len(body) >= int(length)
    reply.body = body
    return reply, False  # no length: the body ends at EOF


def exchange(
    addr: tuple[str, int],
    data: bytes,
    *,
    timeout: float = 4.0,
    wait_close: float = 0.0,
    head_request: bool = False,
) -> Reply:
    """Send `data` on a fresh connection and read one response. With wait_close > 0, keep
    reading up to that long after the response to see whether the server closes."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    raw = b""
    reply, done, error, eof = Reply(), False, "", False
    with socket.create_connection(addr, timeout=timeout) as sock:
        try:
            sock.sendall(data)
        except OSError as exc:  # the server may answer and close before reading it all
            error = f"send: {exc!r}"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                error = error if done else (error or "timeout")
                break
            sock.settimeout(left)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                error = error if done else (error or "timeout")
                break
            except OSError as exc:  # a reset: the end of the connection
                error, eof = error or f"recv: {exc!r}", True
                break
            if not chunk:
                eof = True
                break
            raw += chunk
            if not done:
                reply, done = parse(raw, head_request)
                if done:
                    reply.seconds = time.monotonic() - t0
                    if wait_close <= 0:
                        break
                    deadline = time.monotonic() + wait_close
        if not done:
            reply, complete = parse(raw, head_request)
            if reply.status is not None and not complete and not eof:
                error = error or "incomplete response"
            reply.seconds = time.monotonic() - t0
    reply.raw, reply.eof, reply.error = raw, eof, error
    return reply


def request_bytes(
    method: str,
    target: str | bytes,
    host: str | bytes | None,
    headers: list[tuple[str | bytes, str | bytes]] = (),  # type: ignore[assignment]
    body: bytes = b"",
    *,
    version: str = "HTTP/1.1",
    content_length: bool = True,
) -> bytes:
    """A request as bytes; str parts are latin-1 encoded, `host` None sends no Host header.
    Connection: close, so the server's answer ends the exchange."""

    def b(x: str | bytes) -> bytes:
        return x if isinstance(x, bytes) else x.encode("latin-1")

    lines = [b(method) + b" " + b(target) + b" " + b(version)]
    if host is not None:
        lines.append(b"Host: " + b(host))
    lines += [b(k) + b": " + b(v) for k, v in headers]
    if body and content_length:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def security_header_problems(reply: Reply) -> list[str]:
    """What the contract's every-response headers lack on this reply."""
    h = reply.headers
    problems = []
    if h.get("x-content-type-options", "").lower() != "nosniff":
        problems.append(f"X-Content-Type-Options={h.get('x-content-type-options')!r}")
    csp = h.get("content-security-policy", "")
    missing = [p for p in CSP_PARTS if p not in csp]
    if missing:
        problems.append(f"Content-Security-Policy={csp!r} lacks {missing}")
    if h.get("referrer-policy", "").lower() != "no-referrer":
        problems.append(f"Referrer-Policy={h.get('referrer-policy')!r}")
    if not h.get("cache-control"):
        problems.append("no Cache-Control")
    return problems


def error_body_problems(reply: Reply, echo: bytes = b"") -> list[str]:
    """An error must be JSON {"error": str}, without traceback or server file path (`echo`:
    the request's own target, which a message may quote)."""
    problems = []
    ctype = reply.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        problems.append(f"Content-Type={reply.headers.get('content-type')!r}")
    try:
        obj = json.loads(reply.body)
        if not (isinstance(obj, dict) and isinstance(obj.get("error"), str) and obj["error"]):
            problems.append(f"body is not {{'error': str}}: {reply.body[:200]!r}")
    except ValueError:
        problems.append(f"body is not JSON: {reply.body[:200]!r}")
    leak = LEAKS.search(reply.body.replace(echo, b"") if echo else reply.body)
    if leak:
        problems.append(f"body leaks {leak.group(0)!r}")
    return problems


def start(**kwargs: Any) -> tuple[Any, str, list[str]]:
    """start_server with the contract's keywords; the ones this server's start_server does
    not take yet are dropped and returned, so each test fails on its own assertion."""
    accepted = inspect.signature(server.start_server).parameters
    dropped = [k for k in kwargs if k not in accepted]
    srv, url = server.start_server(
        "127.0.0.1", 0, **{k: v for k, v in kwargs.items() if k in accepted}
    )
    return srv, url, dropped


class ServerProcess:
    """`python server.py --skip-build --port 0 ARGS` as a child process (its own memory)."""

    def __init__(self, *args: str, log: Path) -> None:
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, "server.py", "--skip-build", "--port", "0", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()  # "Serving on http://127.0.0.1:N/ ..."
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.stop()
            raise AssertionError(f"server.py did not say where it serves: {line!r}")
        self.addr = ("127.0.0.1", int(m.group(1)))

    def vm_hwm(self) -> int:
        """Peak resident memory so far, bytes (/proc/PID/status VmHWM)."""
        text = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", text).group(1)) * 1024  # type: ignore[union-attr]

    def stderr(self) -> str:
        self._err.flush()
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdout:
            self.proc.stdout.close()
        self._err.close()
