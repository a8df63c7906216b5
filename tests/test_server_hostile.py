"""The server against hostile input, black-box over loopback (the contract:
docs/serving.md; issue 15's findings 1-4, 6 and 7).

A table of hostile request kinds (raw bytes over a socket), each sent once by a
module-scoped fixture against one server with small limits; every reply must be a complete
response with the expected status, the security headers, and (for errors) a JSON body
without traceback. Then the declared-shape memory blow-up on a server.py child process
(its memory measured alone), the command line, and which files are served.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from py_harness.host import paths
from py_harness.host.serving import server
from tests.hostile import (
    REPO,
    MiB,
    Reply,
    ServerProcess,
    address,
    error_body_problems,
    exchange,
    request_bytes,
    security_header_problems,
    start,
)

MAX_BODY = 1 * MiB
MAX_REFERENCE_MB = 16  # over the model's fixed 5 MiB: a 4 x 4 case passes, 1024 x 1024 not
TIMEOUT = 2.0
ALLOW = "GET, HEAD, POST"
EVIL = "http://evil.example"
# Bodies of files that must never be served, by a marker in them.
SECRETS = {
    "pyproject.toml": b"[tool.ruff]",
    "server.py": b"from py_harness.host.serving.server import main",
    ".git/HEAD": b"ref: refs/",
    ".venv/pyvenv.cfg": b"home = ",
    "/etc/passwd": b"root:x:0:0",
}
PYODIDE = paths.pyodide_dir()
# Files that sit in the served folders but that no page uses: 404 (checked to exist below).
NOT_PAGE_FILES = [
    f"/pyodide/{p.name}"
    for p in sorted(PYODIDE.glob("*"))
    if p.name in ("console.html", "console-v2.html", "README.md", "package.json")
    or p.name.endswith((".d.ts", ".map"))
] + ["/harness/node-harness.mjs", "/harness/pyodide-snapshot.mjs"]


# ---- request builders ---------------------------------------------------------------------
@dataclass(frozen=True)
class Ctx:
    """What a request builder needs: the server's Host value."""

    host: str  # "127.0.0.1:PORT"


Build = Callable[[Ctx], bytes]


OWN = object()  # the server's own Host value


def get(target: str | bytes, *, host: object = OWN, headers=(), method="GET") -> Build:
    """GET (or `method`) of a raw target; host None sends no Host header."""
    return lambda c: request_bytes(
        method,
        target,
        c.host if host is OWN else host,
        list(headers),  # type: ignore[arg-type]
    )


def post(
    path: str,
    body: bytes,
    *,
    ctype: str | None = "application/json",
    headers=(),
    length: str | bytes | None = "auto",
) -> Build:
    """POST with a body; length "auto" sends the right Content-Length, None none, else
    that raw value (the body is still sent, so a server that reads it finds it)."""

    def build(c: Ctx) -> bytes:
        hdrs = list(headers)
        if ctype is not None:
            hdrs.append(("Content-Type", ctype))
        value = str(len(body)) if length == "auto" else length  # "Content-Length: 0" too
        if value is not None:
            hdrs.append((b"Content-Length", value))
        return request_bytes("POST", path, c.host, hdrs, body, content_length=False)

    return build


def raw(data: bytes) -> Build:
    """Bytes as they are; {host} is replaced by the server's Host value."""
    return lambda c: data.replace(b"{host}", c.host.encode())


def b64(n: int) -> str:
    return base64.b64encode(np.zeros(n, "<f4").tobytes()).decode()


def config(sq: int, sk: int, d: int = 1, b: int = 1, h: int = 1) -> dict:
    return {"batch": b, "num_heads": h, "seq_q": sq, "seq_k": sk, "head_dim": d}


def judge_body(cfg: dict, *, all_outputs: bool = False) -> bytes:
    """A well-formed /api/judge body for `cfg` (zeros), tensors of the declared sizes."""
    q = cfg["batch"] * cfg["seq_q"] * cfg["num_heads"] * cfg["head_dim"]
    kv = cfg["batch"] * cfg["seq_k"] * cfg["num_heads"] * cfg["head_dim"]
    inputs = {"q": b64(q), "k": b64(kv), "v": b64(kv), "d_out": b64(q)}
    outputs = {"o": b64(q)}
    if all_outputs:
        outputs |= {
            "lse": b64(cfg["batch"] * cfg["num_heads"] * cfg["seq_q"]),
            "dq": b64(q),
            "dk": b64(kv),
            "dv": b64(kv),
        }
    return json.dumps({"config": cfg, "inputs": inputs, "outputs": outputs}).encode()


SMALL = config(4, 4)
SMALL_BODY = json.loads(judge_body(SMALL))
# Reference cost of Sq x Sk float64 matrices far over MAX_REFERENCE_MB, bodies tiny: cheap
# for any server to refuse, and cheap (a few MB) for one that wrongly computes it.
OVER_LIMIT = judge_body(config(1024, 1024))
LONG_CASE = "d128-sq1024-sk256-mqa32x1"  # 64 MiB per Sq x Sk float64 matrix


def jd(obj: object) -> bytes:
    return json.dumps(obj).encode()


# ---- the table ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    name: str
    requests: tuple[Build, ...]
    expect: tuple[int, ...]
    mention: tuple[str, ...] = ()  # words the error message must contain
    closes: bool = False  # the server must close the connection after answering


def kind(name: str, expect: int | tuple[int, ...], *requests: Build, **kw) -> Kind:
    return Kind(name, requests, expect if isinstance(expect, tuple) else (expect,), **kw)


REFUSED = (400, 403, 404)
BIG_HEADER = "a" * (65 * 1024)

KINDS = [
    # Finding 2: Host.
    kind(
        "host-foreign",
        400,
        get("/demo/index.html", host="evil.example"),
        get("/demo/index.html", host="evil.example:80"),
        get("/api/info", host="127.0.0.1.evil.example"),
        get("/api/info", host="localhost.evil.example"),
        get("/demo/index.html", host="127.0.0.2"),
    ),
    kind(
        "host-foreign-named", 400, get("/api/info", host="evil.example"), mention=("evil.example",)
    ),
    kind("host-empty", 400, get("/demo/index.html", host=""), get("/api/info", host=" ")),
    kind(
        "host-missing",
        400,
        get("/demo/index.html", host=None),
        raw(b"GET /demo/index.html HTTP/1.0\r\n\r\n"),
        raw(b"GET /api/info HTTP/1.0\r\nConnection: close\r\n\r\n"),
    ),
    # Methods.
    kind(
        "method-not-allowed",
        405,
        get("/demo/index.html", method="OPTIONS"),
        get(
            "/api/judge",
            method="OPTIONS",
            headers=[("Origin", EVIL), ("Access-Control-Request-Method", "POST")],
        ),
        get("/api/judge", method="PUT"),
        get("/demo/index.html", method="DELETE"),
        get("/api/info", method="PATCH"),
        get("/demo/index.html", method="TRACE"),
        get(b"127.0.0.1:80", method="CONNECT"),
    ),
    kind(
        "method-unknown",
        501,
        get("/demo/index.html", method="FOO"),
        get("/demo/", method="PROPFIND"),
        get("/api/info", method="BREW"),
    ),
    kind(
        "post-outside-api",
        405,
        post("/demo/index.html", b"{}"),
        post("/", b"{}"),
        post("/pyodide/pyodide.mjs", b"{}"),
    ),
    # Finding 3: Content-Length.
    kind(
        "content-length-superscript",
        400,
        post("/api/judge", b"{}", length=b"\xb2"),  # latin-1 superscript two
        post("/api/judge", b"{}", length=b"\xb9"),
        post("/api/judge", b"{}", length=b"\xb3"),
        post("/api/judge", b"{}", length="²".encode()),  # UTF-8
        post("/api/judge", b"{}", length="٣".encode()),  # Arabic-Indic three
    ),
    kind(
        "content-length-not-digits",
        400,
        post("/api/judge", b"{}", length="-1"),
        post("/api/judge", b"{}", length="1e3"),
        post("/api/judge", b"{}", length="+2"),
        post("/api/judge", b"{}", length="0x2"),
        post("/api/judge", b"{}", length="1_0"),
        post("/api/judge", b"{}", length=b"\xa02"),  # NBSP, which int() would strip
    ),
    kind(
        "content-length-too-many-digits",
        400,
        post("/api/judge", b"{}", length="9" * 4301),
        post("/api/judge", b"{}", length="1" + "0" * 20),  # 21 digits
        post("/api/judge", b"{}", length="0" * 21 + "2"),
    ),
    kind(
        "content-length-conflicting",
        400,
        post("/api/judge", b"{}", headers=[("Content-Length", "3")], length="2"),
    ),
    kind(
        "content-length-over-limit",
        413,
        raw(
            b"POST /api/judge HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1048577\r\n\r\n{"
        ),
        raw(
            b"POST /api/judge_case HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
            b"\r\nContent-Length: 99999999999999999999\r\n\r\n"  # 20 digits: valid, too big
        ),
        raw(
            b"POST /api/judge HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000000\r\n\r\n"
        ),
        closes=True,
    ),
    kind(
        "post-length-missing",
        411,
        post("/api/judge", b"", length=None),
        post("/api/judge_case", b"", length=None),
    ),
    kind(
        "post-chunked",
        411,
        raw(
            b"POST /api/judge HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        ),
        raw(
            b"POST /api/judge_case HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
            b"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"
        ),
    ),
    kind(
        "post-chunked-and-length",
        (400, 411),
        raw(
            b"POST /api/judge HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            b"2\r\n{}\r\n0\r\n\r\n"
        ),
    ),
    kind(  # a coding h11 does not know: 501 is RFC 9112's answer, 411/400 the contract's
        "post-unknown-transfer-coding",
        (400, 411, 501),
        raw(
            b"POST /api/judge HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n0\r\n\r\n"
        ),
        raw(
            b"POST /api/judge HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2\r\nTransfer-Encoding: identity\r\nConnection: close\r\n\r\n{}"
        ),
    ),
    kind(  # reply slots (host/exchange.py): only ones this process's sessions opened
        "post-to-no-reply-slot",
        404,
        post("/exchange/made-up-token", b"\x00" * 8, ctype="application/octet-stream"),
        post("/exchange/", OVER_LIMIT, ctype="text/plain;charset=UTF-8"),
        raw(
            b"POST /exchange/x HTTP/1.1\r\nHost: {host}\r\nContent-Type: "
            b"application/octet-stream\r\nContent-Length: 1000000000000\r\n\r\n"
        ),
        mention=("no reply is awaited",),
        closes=True,
    ),
    # Finding 1 (the no-cors route): only application/json, only from allowed origins.
    kind(
        "content-type-not-json",
        415,
        post("/api/judge", OVER_LIMIT, ctype="text/plain;charset=UTF-8"),
        post("/api/judge", OVER_LIMIT, ctype=None),
        post("/api/judge", b"config=1", ctype="application/x-www-form-urlencoded"),
        post("/api/judge", b"--x--", ctype="multipart/form-data; boundary=x"),
        post("/api/judge_case", b"{}", ctype="text/json"),
    ),
    kind(  # the contract: application/json, optionally "; charset=utf-8", else 415
        "content-type-json-other-charset",
        415,
        post("/api/judge", b"{}", ctype="application/json; charset=latin-1"),
        post("/api/judge_case", b"{}", ctype="application/json; charset=utf-16"),
    ),
    kind(
        "cross-origin-no-cors-post",
        (403, 415),
        post(
            "/api/judge", OVER_LIMIT, ctype="text/plain;charset=UTF-8", headers=[("Origin", EVIL)]
        ),
        post(
            "/api/judge",
            OVER_LIMIT,
            ctype="text/plain",
            headers=[("Origin", "http://localhost.evil.example")],
        ),
    ),
    kind(
        "origin-foreign",
        403,
        post("/api/judge", OVER_LIMIT, headers=[("Origin", EVIL)]),
        post("/api/judge", OVER_LIMIT, headers=[("Origin", "null")]),
        post("/api/judge_case", b"{}", headers=[("Origin", "http://127.0.0.1.evil.example")]),
    ),
    # Sizes.
    kind(
        "request-line-too-long",
        414,
        get("/demo/" + "a" * (9 * 1024)),
        get("/api/info?x=" + "b" * (16 * 1024)),
    ),
    kind(
        "header-block-too-big",
        431,
        get("/demo/index.html", headers=[("X-Big", BIG_HEADER)]),
        get("/demo/index.html", headers=[(f"X-H{i}", "c" * 1900) for i in range(36)]),
        get("/demo/index.html", headers=[(f"X-N{i}", "1") for i in range(101)]),
        get("/api/info", headers=[(f"X-N{i}", "1") for i in range(300)]),
    ),
    # Malformed HTTP.
    kind(
        "malformed-request-line",
        400,
        raw(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),  # a TLS hello
        raw(b"GET /demo/index.html\r\nHost: {host}\r\n\r\n"),
        raw(b"HELLO\r\n\r\n"),
        raw(b"GET /demo/a b HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        raw(b"GET /demo/index.html HTTP/1.1 extra\r\nHost: {host}\r\n\r\n"),
    ),
    kind(
        "malformed-header",
        400,
        raw(b"GET /demo/index.html HTTP/1.1\r\nHost : {host}\r\n\r\n"),
        raw(b"GET /demo/index.html HTTP/1.1\r\nHost: {host}\r\nFoo bar\r\n\r\n"),
        raw(b"GET /demo/index.html HTTP/1.1\r\nHost: {host}\r\nX: a\rb\r\n\r\n"),  # bare CR
        raw(b"GET /demo/index.html HTTP/1.1\r\nHost: {host}\r\nX: a\x00b\r\n\r\n"),
        raw(b"GET /demo/index.html HTTP/1.1\r\n Host: {host}\r\n\r\n"),
        raw(b"GET /demo/index.html HTTP/1.1\r\nHost: {host}\r\nX(y): z\r\n\r\n"),
    ),
    # Finding 4: JSON.
    kind(
        "json-not-json",
        400,
        post("/api/judge", b"{not json"),
        post("/api/judge", b"\xff\xfe{}"),
        post("/api/judge_case", b""),
    ),
    kind("json-not-object", 400, post("/api/judge", b"[]"), post("/api/judge_case", b'"x"')),
    kind(
        "json-nested-deep",
        400,
        post("/api/judge", b"[" * 100_000),
        post("/api/judge", b'{"config": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        post("/api/judge_case", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    ),
    kind(
        "json-inputs-list",
        400,
        post("/api/judge", jd({"config": SMALL, "inputs": [], "outputs": {}})),
        mention=("inputs",),
    ),
    kind(
        "json-config-int",
        400,
        post("/api/judge", jd({"config": 5, "inputs": {}, "outputs": {}})),
        post("/api/judge", jd({"config": [], "inputs": {}, "outputs": {}})),
        mention=("config",),
    ),
    kind(
        "json-outputs-value-int",
        400,
        post("/api/judge", jd({**SMALL_BODY, "outputs": {"o": 7}})),
        mention=("o",),
    ),
    kind(
        "json-outputs-list",
        400,
        post("/api/judge", jd({**SMALL_BODY, "outputs": ["o"]})),
        mention=("outputs",),
    ),
    kind(
        "json-judge-case-wrong-types",
        (400, 404),
        post("/api/judge_case", jd({"case": 5, "reply": {"outputs": {}}})),
        post("/api/judge_case", jd({"case": ["x"], "reply": {"outputs": {}}})),
    ),
    kind(
        "json-judge-case-reply-list",
        400,
        post("/api/judge_case", jd({"case": "d1-sq17-sk17-h4", "reply": []})),
        mention=("reply",),
    ),
    # Finding 1: the reference's cost follows the declared config, refused before array work.
    kind(
        "judge-declared-shape-over-limit",
        422,
        post("/api/judge", OVER_LIMIT),
        post("/api/judge", judge_body(config(2048, 512))),
        post("/api/judge", judge_body(config(1024, 1024), all_outputs=True)),
        mention=("limit", "--max-reference-mb"),
    ),
    kind(
        "judge-case-over-limit",
        422,
        post(
            "/api/judge_case",
            jd({"case": LONG_CASE, "reply": {"outputs": {}}}),
        ),
        mention=("limit", "--max-reference-mb"),
    ),
    # Finding 7: traversal and files outside the pages' set.
    kind(
        "traversal-raw-dotdot",
        REFUSED,
        get("/demo/../server.py"),
        get("/demo/../../../../../../etc/passwd"),
        get("/shaders/../pyproject.toml"),
        get("/pyodide/../../server.py"),
        get("/../server.py"),
    ),
    kind(
        "traversal-encoded-dotdot",
        REFUSED,
        get("/demo/%2e%2e/server.py"),
        get("/demo/%2E%2E%2Fpyproject.toml"),
        get("/demo/..%2fserver.py"),
        get("/%2e%2e/%2e%2e/%2e%2e/etc/passwd"),
    ),
    kind(
        "traversal-double-encoded",
        REFUSED,
        get("/demo/%252e%252e/server.py"),
        get("/demo/%252e%252e%252fpyproject.toml"),
        get("/demo/..%252fserver.py"),
    ),
    kind(
        "traversal-overlong-utf8",
        REFUSED,
        get("/demo/%c0%ae%c0%ae/server.py"),
        get("/demo/%c0%ae%c0%ae%c0%afpyproject.toml"),
        get("/demo/..%c0%afserver.py"),
        get("/demo/%e0%80%ae%e0%80%ae/server.py"),
        get(b"/demo/\xc0\xae\xc0\xae/server.py"),
    ),
    kind(
        "traversal-backslash",
        REFUSED,
        get(b"/demo/..\\server.py"),
        get("/demo/..%5cserver.py"),
        get(b"/demo\\..\\pyproject.toml"),
        get("/demo/%5c..%5cserver.py"),
    ),
    kind(
        "traversal-nul",
        REFUSED,
        get("/demo/index.html%00.js"),
        get("/demo/%00../server.py"),
        get(b"/demo/index.html\x00/../../server.py"),
    ),
    kind(
        "traversal-absolute",
        REFUSED,
        get("//etc/passwd"),
        get("/demo//etc/passwd"),
        get("/demo/%2fetc%2fpasswd"),
        get("/etc/passwd"),
        get(f"/demo/{REPO}/server.py"),
    ),
    kind(
        "repo-dot-git",
        REFUSED,
        get("/.git/HEAD"),
        get("/demo/../.git/HEAD"),
        get("/demo/%2e%2e/.git/config"),
    ),
    kind(
        "repo-dot-venv",
        REFUSED,
        get("/.venv/pyvenv.cfg"),
        get("/demo/../.venv/pyvenv.cfg"),
        get("/demo/%2e%2e/.venv/bin/python"),
    ),
    kind(
        "repo-source-files",
        REFUSED,
        get("/server.py"),
        get("/pyproject.toml"),
        get("/py_harness/host/serving/server.py"),
        get("/dist/../../pyproject.toml"),
    ),
    kind("not-a-page-file", 404, *(get(p) for p in NOT_PAGE_FILES)),
]


@pytest.fixture(scope="module")
def hostile_server() -> Iterator[tuple[str, list[str]]]:
    srv, url, dropped = start(max_body=MAX_BODY, timeout=TIMEOUT, max_reference_mb=MAX_REFERENCE_MB)
    yield url, dropped
    server.stop(srv)


@pytest.fixture(scope="module")
def replies(hostile_server: tuple[str, list[str]]) -> dict[str, list[tuple[bytes, Reply]]]:
    """Every request of the table, sent once (8 at a time), by kind name."""
    url, _ = hostile_server
    addr = address(url)
    ctx = Ctx(host=f"127.0.0.1:{addr[1]}")
    jobs = [(k, r(ctx)) for k in KINDS for r in k.requests]

    def send(job: tuple[Kind, bytes]) -> tuple[str, bytes, Reply]:
        k, data = job
        reply = exchange(addr, data, timeout=4.0, wait_close=1.0 if k.closes else 0.0)
        return k.name, data, reply

    out: dict[str, list[tuple[bytes, Reply]]] = {k.name: [] for k in KINDS}
    with ThreadPoolExecutor(8) as pool:
        for name, data, reply in pool.map(send, jobs):
            out[name].append((data, reply))
    return out


def problems(k: Kind, data: bytes, reply: Reply) -> list[str]:
    """What is wrong with one reply to one request of kind k."""
    if reply.status is None:
        return [f"no response: no status line before the end ({reply.describe()})"]
    found = []
    if reply.status not in k.expect:
        found.append(f"status {reply.status}, want {k.expect}")
    found += security_header_problems(reply)
    if reply.status >= 400:
        target = data.split(b" ", 2)[1] if data.count(b" ") >= 2 else b""
        found += error_body_problems(reply, echo=target)
        text = reply.body.decode("utf-8", "replace")
        found += [f"error does not mention {w!r}" for w in k.mention if w not in text]
    if reply.status == 405:
        # POST outside /api/ may list what that resource takes (GET, HEAD).
        allow = (ALLOW, "GET, HEAD") if k.name == "post-outside-api" else (ALLOW,)
        if reply.headers.get("allow") not in allow:
            found.append(f"Allow={reply.headers.get('allow')!r}")
        cors = [h for h in reply.headers if h.startswith("access-control-")]
        if cors:
            found.append(f"CORS headers {cors}")
    if k.closes and not reply.eof:
        found.append("connection not closed after the response")
    for name, marker in SECRETS.items():
        if marker in reply.raw:
            found.append(f"served {name}")
    return [f"{p} [{reply.describe()}]" for p in found]


@pytest.mark.parametrize("k", [pytest.param(k, id=k.name) for k in KINDS])
def test_hostile_kind(k: Kind, replies: dict[str, list[tuple[bytes, Reply]]]) -> None:
    bad = {data[:120]: problems(k, data, r) for data, r in replies[k.name]}
    bad = {d: p for d, p in bad.items() if p}
    assert not bad, "\n".join(f"{d!r}:\n  " + "\n  ".join(p) for d, p in bad.items())


def test_hostile_summary(replies: dict[str, list[tuple[bytes, Reply]]]) -> None:
    """The issue's targets over the whole table."""
    all_replies = [(k, d, r) for k in KINDS for d, r in replies[k.name]]
    unanswered = [d[:80] for _, d, r in all_replies if r.status is None]
    tracebacks = [d[:80] for _, d, r in all_replies if b"Traceback" in r.raw]
    served = [d[:80] for _, d, r in all_replies if r.status == 200]
    wrong = [(k.name, r.status) for k, _, r in all_replies if r.status not in k.expect]
    headerless = [(k.name, r.status) for k, _, r in all_replies if security_header_problems(r)]
    print(
        f"\n{len(all_replies)} hostile requests of {len(KINDS)} kinds: "
        f"{len(unanswered)} unanswered, {len(tracebacks)} tracebacks, {len(served)} served, "
        f"{len(wrong)} unexpected statuses, {len(headerless)} without the security headers"
    )
    assert len(all_replies) >= 100 and len(KINDS) >= 20
    assert not unanswered, f"connections closed without a response: {unanswered}"
    assert not tracebacks, f"tracebacks in bodies: {tracebacks}"
    assert not served, f"files served outside the pages' set: {served}"
    assert not wrong, f"unexpected statuses: {wrong}"
    assert not headerless, f"responses without the security headers: {headerless}"


def test_start_server_takes_the_contract_keywords(hostile_server: tuple[str, list[str]]) -> None:
    _, dropped = hostile_server
    assert not dropped, f"start_server() does not take {dropped}"


# ---- normal requests still work, with the headers ----------------------------------------
def fetch(
    url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> tuple[int, dict[str, str], bytes]:
    host, port = address(url)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def page_files() -> list[str]:
    """The files the pages load (the contract's served set), as they exist here."""
    web = [
        f"/{route}/{p.name}"
        for route, folder in (("harness", paths.HARNESS_WEB_DIR), ("demo", paths.DEMO_WEB_DIR))
        for p in sorted(folder.iterdir())
        # Node's scripts are read from disk, not served: the harness and the snapshot maker
        if p.suffix in (".html", ".js", ".mjs", ".css")
        and p.name not in ("node-harness.mjs", "pyodide-snapshot.mjs")
    ]
    shaders = [f"/shaders/{p.name}" for p in sorted(paths.SHADER_DIR.glob("*.wgsl"))]
    pyodide = [
        f"/pyodide/{n}"
        for n in (
            "pyodide.js",
            "pyodide.mjs",
            "pyodide.asm.js",
            "pyodide.asm.mjs",  # what this Pyodide's pyodide.mjs imports
            "pyodide.asm.wasm",
            "python_stdlib.zip",
            "pyodide-lock.json",
        )
        if (PYODIDE / n).is_file()
    ]
    dist = [f"/dist/{p.name}" for p in sorted(paths.dist_dir().glob("*.whl"))]
    for name in ("pyodide-lock.json", "pyodide-snapshot.bin"):
        if (paths.dist_dir() / name).is_file():
            dist.append(f"/dist/{name}")
    return web + shaders + pyodide + dist


def local_file(path: str) -> Path:
    route, _, rest = path[1:].partition("/")
    return server.default_routes()[route] / rest


@pytest.mark.parametrize("path", page_files())
def test_page_files_still_load(hostile_server: tuple[str, list[str]], path: str) -> None:
    url, _ = hostile_server
    want = local_file(path)
    status, headers, body = fetch(url, "HEAD", path)
    assert status == 200, path
    assert int(headers["content-length"]) == want.stat().st_size
    if want.stat().st_size < MiB:
        status, headers, body = fetch(url, "GET", path)
        assert (status, body) == (200, want.read_bytes())


def test_pages_use_the_asm_module_this_pyodide_ships() -> None:
    """The contract lists pyodide.asm.js; this Pyodide's pyodide.mjs imports pyodide.asm.mjs,
    so that one must be in the served set (test_page_files_still_load asks for it)."""
    mjs = (PYODIDE / "pyodide.mjs").read_text(errors="replace")
    shipped = [n for n in ("pyodide.asm.js", "pyodide.asm.mjs") if n in mjs]
    assert shipped and all((PYODIDE / n).is_file() for n in shipped)


def test_not_page_files_exist_here() -> None:
    """The 404 table asks for files that are really there."""
    for path in NOT_PAGE_FILES:
        assert local_file(path).is_file(), path
    assert len(NOT_PAGE_FILES) >= 6


def _as_reply(status: int, headers: dict[str, str], body: bytes = b"") -> Reply:
    return Reply(status=status, headers=headers, body=body)


@pytest.mark.parametrize(
    ("method", "path", "expect"),
    [
        pytest.param("GET", "/demo/index.html", 200, id="file"),
        pytest.param("HEAD", "/demo/demo.css", 200, id="file-head"),
        pytest.param("GET", "/pyodide/pyodide-lock.json", 200, id="pyodide-file"),
        pytest.param("GET", "/api/info", 200, id="api-json"),
        pytest.param("GET", f"/api/inputs?case={'d1-sq17-sk17-h4'}", 200, id="api-inputs"),
        pytest.param("GET", "/", 302, id="redirect"),
        pytest.param("GET", "/demo/missing.js", 404, id="not-found"),
        pytest.param("GET", "/api/nope", 404, id="api-not-found"),
        pytest.param("POST", "/demo/index.html", 405, id="post-not-allowed"),
        pytest.param("DELETE", "/demo/index.html", 405, id="method-not-allowed"),
        pytest.param("GET", "/api/inputs?case=nope", 404, id="api-unknown-case"),
    ],
)
def test_every_response_kind_has_the_headers(
    hostile_server: tuple[str, list[str]], method: str, path: str, expect: int
) -> None:
    url, _ = hostile_server
    body = b"{}" if method == "POST" else None
    hdrs = {"Content-Type": "application/json"} if body else {}
    status, headers, data = fetch(url, method, path, body, hdrs)
    reply = _as_reply(status, headers, data)
    assert status == expect
    assert not security_header_problems(reply), headers
    if status >= 400:
        assert not error_body_problems(reply)
    if status == 302:
        assert headers["location"] == "/demo/index.html"


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("127.0.0.1:{port}", id="loopback-with-port"),
        pytest.param("127.0.0.1", id="loopback-without-port"),
        pytest.param("localhost:{port}", id="localhost"),
        pytest.param("[::1]:{port}", id="ipv6-loopback"),
        pytest.param("localhost:1", id="localhost-other-port"),
    ],
)
def test_allowed_hosts_are_served(hostile_server: tuple[str, list[str]], host: str) -> None:
    url, _ = hostile_server
    addr = address(url)
    data = request_bytes("GET", "/demo/index.html", host.format(port=addr[1]))
    reply = exchange(addr, data)
    assert reply.status == 200, reply.describe()


def test_allow_host_names_another_host() -> None:
    srv, url, dropped = start(allow_hosts=("harness.test",))
    try:
        assert "allow_hosts" not in dropped, "start_server() does not take allow_hosts"
        addr = address(url)
        ok = exchange(addr, request_bytes("GET", "/demo/index.html", f"harness.test:{addr[1]}"))
        bad = exchange(addr, request_bytes("GET", "/demo/index.html", "other.test"))
        assert (ok.status, bad.status) == (200, 400), (ok.describe(), bad.describe())
    finally:
        server.stop(srv)


def test_same_origin_post_is_not_refused(hostile_server: tuple[str, list[str]]) -> None:
    """The page's own POSTs carry Origin: the server's origin; they go through."""
    url, _ = hostile_server
    status, headers, data = fetch(
        url,
        "POST",
        "/api/judge",
        jd({"config": 5}),
        {"Content-Type": "application/json; charset=utf-8", "Origin": url},
    )
    assert status == 400, data  # judged on its content (config), not refused for Origin
    assert b"config" in data


def test_large_legal_headers_and_request_line_are_accepted(
    hostile_server: tuple[str, list[str]],
) -> None:
    """Under the limits (8 KiB request line, 64 KiB / 100 headers) is still served."""
    url, _ = hostile_server
    addr = address(url)
    host = f"127.0.0.1:{addr[1]}"
    headers = [(f"X-H{i}", "d" * 1000) for i in range(40)]  # 40 KiB in 40 headers
    reply = exchange(addr, request_bytes("GET", "/demo/index.html", host, headers))
    assert reply.status == 200, reply.describe()
    reply = exchange(addr, request_bytes("GET", "/demo/index.html?" + "e" * 7000, host))
    assert reply.status == 200, reply.describe()


def test_over_limit_body_is_refused_unread(hostile_server: tuple[str, list[str]]) -> None:
    """413 at once although the body never comes, and the connection is closed."""
    url, _ = hostile_server
    addr = address(url)
    data = request_bytes(
        "POST",
        "/api/judge",
        f"127.0.0.1:{addr[1]}",
        [("Content-Type", "application/json"), ("Content-Length", str(MAX_BODY + 1))],
        content_length=False,
    )
    reply = exchange(addr, data, timeout=3.0, wait_close=1.0)
    assert reply.status == 413 and reply.seconds < 1.0 and reply.eof, reply.describe()


def test_info_states_the_reference_limit(hostile_server: tuple[str, list[str]]) -> None:
    url, _ = hostile_server
    status, _, data = fetch(url, "GET", "/api/info")
    info = json.loads(data)
    assert status == 200
    limits = info.get("reference_limits")
    assert isinstance(limits, dict), info
    assert limits.get("max_reference_bytes") == MAX_REFERENCE_MB * MiB, limits


# ---- finding 1 on a server.py process: memory follows the body, not the declared shape -----
@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(log=tmp_path_factory.mktemp("server") / "stderr.log")
    yield proc
    proc.stop()


@pytest.mark.parametrize(
    ("sq", "all_outputs"),
    [
        # about 100 and 400 s of the blockwise judge by the model: bodies under 2 MB
        pytest.param(40000, False, id="judge-sq40000-853KB-body"),
        pytest.param(80000, False, id="judge-sq80000-1.7MB-body"),
        pytest.param(40000, True, id="judge-sq40000-all-outputs"),
    ],
)
def test_declared_shape_is_refused_before_array_work(
    server_process: ServerProcess, sq: int, all_outputs: bool
) -> None:
    addr = server_process.addr
    host = f"127.0.0.1:{addr[1]}"
    warm = exchange(addr, request_bytes("GET", "/api/info", host))  # NumPy imported
    assert warm.status == 200, warm.describe()
    body = judge_body(config(sq, sq), all_outputs=all_outputs)
    before = server_process.vm_hwm()
    reply = exchange(
        addr,
        request_bytes("POST", "/api/judge", host, [("Content-Type", "application/json")], body),
        timeout=5.0,
    )
    grown = server_process.vm_hwm() - before
    print(
        f"\n{len(body) / 1e3:.0f} KB body: {reply.status} in {reply.seconds:.2f} s, "
        f"server peak memory +{grown / MiB:.0f} MiB"
    )
    assert reply.status == 422, reply.describe()
    assert reply.seconds < 2.0
    assert grown < 512 * MiB, f"memory grew {grown / MiB:.0f} MiB"
    assert not error_body_problems(reply)
    message = reply.json()["error"]
    assert "limit" in message and "--max-reference-mb" in message, message
    assert "Traceback" not in server_process.stderr()


# ---- finding 6: the command line -----------------------------------------------------------
def run_server(*args: str, timeout: float = 5.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "server.py", "--skip-build", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"server.py {' '.join(args)} was accepted and kept serving") from exc


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--port", "99999"], id="port-too-big"),
        pytest.param(["--port", "-1"], id="port-negative"),
        pytest.param(["--max-body-mb", "nan"], id="max-body-nan"),
        pytest.param(["--max-body-mb", "inf"], id="max-body-inf"),
        pytest.param(["--max-body-mb", "-1"], id="max-body-negative"),
        pytest.param(["--max-body-mb", "0"], id="max-body-zero"),
        pytest.param(["--max-reference-mb", "nan"], id="max-reference-nan"),
        pytest.param(["--max-reference-mb", "-1"], id="max-reference-negative"),
        pytest.param(["--timeout", "nan"], id="timeout-nan"),
        pytest.param(["--timeout", "0"], id="timeout-zero"),
        pytest.param(["--timeout", "-5"], id="timeout-negative"),
    ],
)
def test_bad_command_line_is_an_argparse_error(args: list[str]) -> None:
    # --port 0 after the bad value's own option would hide nothing: each case names one option.
    full = args if args[0] == "--port" else [*args, "--port", "0"]
    result = run_server(*full)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and args[0] in errors[0], result.stderr
    assert "unrecognized" not in errors[0], f"server.py has no {args[0]} option"


def test_busy_port_is_one_line_exit_1() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_server("--port", str(port))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert str(port) in result.stderr


def test_help_shows_the_defaults() -> None:
    result = run_server("--help")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    text = " ".join(result.stdout.split())
    for option in ("--host", "--port", "--max-body-mb", "--max-reference-mb", "--timeout"):
        assert option in text, option
    assert text.count("default") >= 5, result.stdout
    for value in ("127.0.0.1", "8000", "64", "10"):
        assert value in text, value


def test_server_process_starts_and_says_where(tmp_path: Path) -> None:
    """The subprocess fixtures rely on it (and it says where it serves)."""
    t0 = time.monotonic()
    proc = ServerProcess(log=tmp_path / "err.log")
    try:
        assert time.monotonic() - t0 < 5
    finally:
        proc.stop()
