"""server.py's /api/ endpoints (py_harness/host/serving/api.py) without a browser: judging agrees
with verdict.judge_outputs / evaluate.evaluate, bad requests get clear errors, big bodies a 413."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from py_harness.config import AttentionConfig
from py_harness.host.judge.cases import CASES, SMOKE, Case, by_id
from py_harness.host.judge.inputs import make_inputs
from py_harness.host.judge.verdict import OUTPUTS, judge_outputs, references
from py_harness.host.serving import api, serve, server

SMALL_LIMIT = 4096


def request(
    base_url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> tuple[int, Any]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    if headers is None:  # the page's POSTs are JSON; the server refuses other types (415)
        headers = {"Content-Type": "application/json"} if method == "POST" else {}
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def post(base_url: str, path: str, obj: Any) -> tuple[int, Any]:
    return request(base_url, "POST", path, json.dumps(obj).encode())


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    srv, url = server.start_server(port=0)
    yield url
    server.stop(srv)


@pytest.fixture(scope="module")
def small_server() -> Iterator[str]:
    srv, url = server.start_server(port=0, max_body=SMALL_LIMIT)
    yield url
    server.stop(srv)


def b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, "<f4").tobytes()).decode()


def unb64(s: str, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), "<f4").reshape(shape)


CFG = AttentionConfig(
    batch=2, num_heads=4, num_kv_heads=2, seq_q=9, seq_k=13, head_dim=5, causal=True
)
# The same with ALiBi, one slope per batch element and head.
ALIBI_CFG = replace(CFG, alibi_shape=(2, 4))


def small_inputs(cfg: AttentionConfig = CFG) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 9, 4, 5), dtype=np.float32)
    kv = (2, 13, 2, 5)
    x = {
        "q": q,
        "k": rng.standard_normal(kv, dtype=np.float32),
        "v": rng.standard_normal(kv, dtype=np.float32),
        "d_out": rng.standard_normal(q.shape, dtype=np.float32),
    }
    if cfg.alibi_shape:
        x["alibi_slopes"] = rng.random(cfg.alibi_shape, dtype=np.float32) * np.float32(0.3)
    return x


def test_info_and_cases(base_url: str) -> None:
    status, info = request(base_url, "GET", "/api/info")
    assert status == 200 and info["max_body_bytes"] == server.DEFAULT_MAX_BODY
    assert "seed" in info["variants"] and info["required_limits"]
    status, smoke = request(base_url, "GET", "/api/cases")
    assert [c["id"] for c in smoke["cases"]] == [c.id for c in SMOKE]
    assert all(AttentionConfig.from_dict(c["config"]) for c in smoke["cases"])
    _, every = request(base_url, "GET", "/api/cases?set=all")
    assert len(every["cases"]) == len(CASES)
    assert all(c["covered"] is None for c in every["cases"])  # no variant asked about


def test_cases_say_what_a_declared_limitation_covers(base_url: str) -> None:
    status, got = request(base_url, "GET", "/api/cases?set=all&variant=seed&adapter=any")
    assert status == 200
    covered = {c["id"]: c["covered"] for c in got["cases"] if c["covered"]}
    flaw = covered["d109-sq7-sk1-h3-win1"]  # one visible key per row: the seed's K scaling
    assert flaw["status"] == "known" and flaw["limitation"] == "seed-k-scaling"
    assert "exactly 1" in flaw["reason"] and flaw["text"].startswith("known flaw")
    _, fast = request(base_url, "GET", "/api/cases?set=all&variant=fast&adapter=any")
    assert not any(c["covered"] for c in fast["cases"])
    for bad in ("variant=nope", "set=all&set=smoke", "colour=red"):
        status, err = request(base_url, "GET", f"/api/cases?{bad}")
        assert status == 400 and err["error"], bad


@pytest.mark.parametrize(
    "case",
    [next(c for c in SMOKE if c.mask == "keypad"), next(c for c in SMOKE if c.alibi != "none")],
    ids=lambda c: c.id,
)
def test_inputs_are_make_inputs(base_url: str, case: Case) -> None:
    """Every tensor of make_inputs (a mask, ALiBi slopes), as the server sends it."""
    status, got = request(base_url, "GET", f"/api/inputs?case={case.id}")
    assert status == 200
    x = make_inputs(case)
    assert set(got["tensors"]) == set(x)
    for name, arr in x.items():
        assert np.array_equal(unb64(got["tensors"][name], arr.shape), arr)


@pytest.mark.parametrize("cfg", [CFG, ALIBI_CFG], ids=["plain", "alibi"])
def test_judge_agrees_with_judge_outputs(base_url: str, cfg: AttentionConfig) -> None:
    x = small_inputs(cfg)
    ref32 = references(cfg, x, np.float32)
    outputs = {n: ref32[n].astype(np.float32) for n in OUTPUTS}
    outputs["dq"] = outputs["dq"] + np.float32(1e-3)  # a kernel bug: dQ off
    status, got = post(
        base_url,
        "/api/judge",
        {
            "config": cfg.to_dict(),
            "inputs": {n: b64(a) for n, a in x.items()},
            "outputs": {n: b64(a) for n, a in outputs.items()},
        },
    )
    assert status == 200, got
    assert got["passed"] is False
    bounds: dict[str, np.ndarray] = {}
    wants, ref64 = judge_outputs(cfg, x, outputs, bounds=bounds)
    assert [r["name"] for r in got["reports"]] == list(OUTPUTS)
    for report, want in zip(got["reports"], wants, strict=True):
        n = report["name"]
        assert report == want.to_json()  # JSON carries floats exactly
        assert report["passed"] is (n != "dq")
        shape = ref64[n].shape
        assert np.array_equal(unb64(got["reference"][n], shape), ref64[n].astype(np.float32))
        err = unb64(got["abs_error"][n], shape)
        assert np.allclose(err, np.abs(outputs[n] - ref64[n]), rtol=1e-6, atol=0)
        # each element's own bound, for the maps: the report's at its worst element, and
        # over it exactly where the output fails
        bound = unb64(got["bound"][n], shape)
        assert np.array_equal(bound, bounds[n].astype(np.float32))
        worst = tuple(report["worst_index"])
        assert np.isclose(bound[worst], report["bound"], rtol=1e-6, atol=0)
        assert bool((np.abs(outputs[n] - ref64[n]) > bounds[n]).any()) is (n == "dq")


def test_non_finite_errors_are_sent_as_strings(base_url: str) -> None:
    x = small_inputs()
    o = references(CFG, x, np.float32)["o"].astype(np.float32)
    o[0, 0, 0, 0] = np.nan
    status, got = post(
        base_url,
        "/api/judge",
        {
            "config": CFG.to_dict(),
            "inputs": {n: b64(a) for n, a in x.items()},
            "outputs": {"o": b64(o)},
        },
    )
    assert status == 200
    (report,) = got["reports"]
    assert report["max_abs_err"] == "Infinity" and report["nan_count"] == 1


def test_judge_case_is_evaluate(base_url: str) -> None:
    case = by_id("d1-sq17-sk17-h4")
    cfg, x = case.config(), make_inputs(case)
    ref32 = references(cfg, x, np.float32)
    reply = {
        "outputs": {n: b64(ref32[n]) for n in OUTPUTS},
        "timings_ms": {"forward_ms": 1.0, "backward_ms": 2.0},
        "timing_source": "wall-clock",
        "backward_digests": ["x"],
    }
    status, got = post(
        base_url, "/api/judge_case", {"case": case.id, "variant": "seed", "reply": reply}
    )
    assert status == 200, got
    assert got["case"] == case.id and got["passed"] is True
    assert [r["name"] for r in got["reports"]] == list(OUTPUTS)
    assert got["covered"] is None and got["status"] == "pass"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "text"),
    [
        ("GET", "/api/nope", None, 404, "no endpoint /api/nope"),
        ("GET", "/api/judge", None, 405, "takes POST"),
        ("POST", "/api/judge", b"{not json", 400, "not JSON"),
        ("GET", "/api/inputs?case=zzz", None, 404, "no case 'zzz'"),
        ("POST", "/demo/index.html", b"{}", 405, ""),
    ],
)
def test_bad_requests(
    base_url: str, method: str, path: str, body: bytes | None, status: int, text: str
) -> None:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == status
    assert text in resp.read().decode()
    conn.close()


def test_invalid_config_gives_the_config_error(base_url: str) -> None:
    bad = CFG.to_dict() | {"num_kv_heads": 3}
    status, got = post(base_url, "/api/judge", {"config": bad, "inputs": {}, "outputs": {}})
    assert status == 400
    assert got["error"] == "num_kv_heads: num_heads (4) must be a multiple of num_kv_heads (3)"


def test_body_over_the_limit_is_413(small_server: str) -> None:
    status, got = request(small_server, "POST", "/api/judge", b"x" * (SMALL_LIMIT + 1))
    assert status == 413
    assert f"at most {SMALL_LIMIT}" in got["error"] and "--max-body-mb" in got["error"]
    # At the limit it is read and judged (here: refused as not JSON, but not as too big).
    status, got = request(small_server, "POST", "/api/judge", b"x" * SMALL_LIMIT)
    assert status == 400


def test_post_without_length_is_411(small_server: str) -> None:
    host, port = small_server.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("POST", "/api/judge")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    conn.send(b"2\r\n{}\r\n0\r\n\r\n")
    assert conn.getresponse().status == 411
    conn.close()


def test_cli_binds_loopback_and_sets_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, int]] = []

    def serve_forever(self: server.HarnessServer, *args: object) -> None:
        seen.append((self.server_address[0], self.max_body))
        raise KeyboardInterrupt

    monkeypatch.setattr(server.HarnessServer, "serve_forever", serve_forever)
    assert serve.main(["--skip-build", "--port", "0"]) == 0
    assert serve.main(["--skip-build", "--port", "0", "--max-body-mb", "0.5"]) == 0
    assert seen == [("127.0.0.1", server.DEFAULT_MAX_BODY), ("127.0.0.1", 2**19)]


def test_reference_over_the_limit_is_422_before_any_array_work(base_url: str) -> None:
    # A small body declaring Sq = Sk = 40000 (about 100 s of judging by the model): the cost
    # follows the declared shape, so the refusal comes before the (here not even base64)
    # tensors are looked at.
    big = CFG.to_dict() | {"batch": 1, "num_heads": 1, "num_kv_heads": 1, "causal": False}
    big |= {"seq_q": 40000, "seq_k": 40000, "head_dim": 1}
    t0 = time.perf_counter()
    status, got = post(base_url, "/api/judge", {"config": big, "inputs": {"q": "!"}, "outputs": {}})
    assert (status, got["error"].split(":")[0]) == (422, "case")
    assert "over its limit of 512 MiB" in got["error"] and "--max-reference-mb" in got["error"]
    assert time.perf_counter() - t0 < 1.0
    # judge_case: a matrix case over a small server's limit gets the same refusal.
    srv, url = server.start_server(port=0, max_reference_mb=1)
    try:
        status, got = post(url, "/api/judge_case", {"case": SMOKE[0].id, "reply": {"outputs": {}}})
    finally:
        server.stop(srv)
    assert status == 422 and "limit of 1 MiB" in got["error"]


def test_one_reference_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow_judge(request: dict, limits: object) -> dict:
        time.sleep(server.REFERENCE_WAIT + 1.5)
        return {"judged": True}

    monkeypatch.setattr(api, "judge", slow_judge)
    srv, url = server.start_server(port=0)
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, url, "/api/judge", {})
            time.sleep(0.3)
            second = pool.submit(request_with_headers, url, "/api/judge", b"{}")
            status, headers, body = second.result()
            assert first.result() == (200, {"judged": True})
    finally:
        server.stop(srv)
    assert status == 503 and headers["Retry-After"] == "2"
    assert "another reference" in json.loads(body)["error"]


def request_with_headers(base_url: str, path: str, body: bytes) -> tuple[int, dict, bytes]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def _judge_body(**config: Any) -> dict[str, Any]:
    x = small_inputs()
    outputs = {n: b64(np.zeros(s, np.float32)) for n, s in CFG.shapes().items() if n in OUTPUTS}
    return {
        "config": CFG.to_dict() | config,
        "inputs": {n: b64(a) for n, a in x.items()},
        "outputs": outputs,
    }


def _case_body(**reply: Any) -> dict[str, Any]:
    shapes = SMOKE[0].config().shapes()
    outputs = {n: b64(np.zeros(shapes[n], np.float32)) for n in OUTPUTS}
    return {"case": SMOKE[0].id, "reply": {"outputs": outputs} | reply}


def _nested(depth: int) -> dict[str, Any]:
    inner: dict[str, Any] = {}
    for _ in range(depth):
        inner = {"a": inner}
    return inner


HUGE = {n: b64(np.full(a.shape, 3.4e38, np.float32)) for n, a in small_inputs().items()}


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        pytest.param(
            "/api/judge",
            _judge_body(scale=1e300),
            400,
            "scale: must be a float > 0 and finite",
            id="scale-1e300",
        ),
        pytest.param(
            "/api/judge",
            _judge_body(scale=1e-50),
            400,
            "scale: must be a float > 0 and finite",
            id="scale-1e-50",
        ),
        pytest.param(
            "/api/judge",
            _judge_body(dropout_p=0.9999999999),
            400,
            "dropout_p: must be a float in",
            id="dropout-rounds-to-1",
        ),
        pytest.param(
            "/api/judge",
            _judge_body(softcap=1e39),
            400,
            "softcap: must be finite as float32",
            id="softcap-1e39",
        ),
        pytest.param(
            "/api/judge",
            _judge_body() | {"inputs": HUGE},
            422,
            "inputs: o: baseline",
            id="inputs-3.4e38",
        ),
        pytest.param(
            "/api/judge",
            {"config": {}, "inputs": {}, "outputs": {}},
            400,
            "batch: is missing",
            id="config-empty",
        ),
        pytest.param(
            "/api/judge",
            _judge_body(mask_shape=5),
            400,
            "mask_shape: must be an array of ints",
            id="mask-shape-int",
        ),
        pytest.param(
            "/api/judge_case",
            _case_body(timings_ms=_nested(900)),
            400,
            "reply.timings_ms: must",
            id="timings-nested-900",
        ),
        pytest.param(
            "/api/judge_case",
            _case_body(backward_digests=5),
            400,
            "reply.backward_digests",
            id="digests-int",
        ),
        pytest.param(
            "/api/judge_case",
            _case_body(backward_digests=[1, 1]),
            400,
            "reply.backward_digests",
            id="digests-ints",
        ),
        pytest.param(
            "/api/judge_case",
            _case_body(backward_digests={"a": 1}),
            400,
            "reply.backward_digests",
            id="digests-object",
        ),
        pytest.param(
            "/api/judge",
            {"pad": [{}] * 10_001, "config": 1},
            400,
            "JSON objects or arrays, at most 10000",
            id="json-amplification",
        ),
        pytest.param(
            "/api/judge_case",
            {"case": SMOKE[0].id, "reply": {"outputs": {}}},
            400,
            "outputs.o",
            id="outputs-empty",
        ),
    ],
)
def test_inputs_that_reached_a_500_are_refused_naming_the_argument(
    path: str, body: dict[str, Any], status: int, words: str
) -> None:
    got_status, got = api.handle("POST", path, "", json.dumps(body).encode(), limits=api.Limits())
    assert (got_status, words) == (status, words) and words in json.loads(got)["error"]


def test_api_methods_say_what_is_allowed_and_head_is_get(base_url: str) -> None:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    for method, path, status, allow in (
        ("POST", "/api/info", 405, "GET, HEAD"),
        ("GET", "/api/judge", 405, "POST"),
        ("HEAD", "/api/info", 200, None),
        ("HEAD", f"/api/inputs?case={SMOKE[0].id}", 200, None),
    ):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        body = b"{}" if method == "POST" else None
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        assert (resp.status, resp.getheader("Allow")) == (status, allow), (method, path)
        if method == "HEAD":
            assert data == b"" and int(resp.getheader("Content-Length")) > 0


def test_http_versions_past_1_1_get_505(base_url: str) -> None:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET /api/info HTTP/2.0\r\nHost: {host}\r\n\r\n".encode())
        head = sock.recv(4096).split(b"\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.1 505")


def test_bodies_wait_unread_for_their_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    # While one judgement runs, ten 30 MB judge requests arrive: none of their bodies is
    # read before its turn (before, each was read into memory first, then queued), and each
    # is told 503 once the wait is over.
    def slow_judge(request: dict, limits: object) -> dict:
        time.sleep(server.REFERENCE_WAIT + 2.0)
        return {"judged": True}

    def rss_mib() -> float:
        status = open("/proc/self/status").read()  # noqa: SIM115
        return int(status.split("VmRSS:")[1].split()[0]) / 1024

    monkeypatch.setattr(api, "judge", slow_judge)
    srv, url = server.start_server(port=0)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    big = b'{"pad": "' + b"x" * (30 << 20) + b'"}'
    head = (
        f"POST /api/judge HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(big)}\r\n\r\n"
    ).encode()

    message = head + big  # one copy, shared by the ten clients (this process's memory too)

    def send_all() -> bytes:
        with socket.create_connection((host, int(port)), timeout=15) as s:
            try:
                s.sendall(message)  # blocks while the server does not read
                return s.recv(4096).split(b"\r\n", 1)[0]
            except (ConnectionResetError, BrokenPipeError, TimeoutError):
                return b"reset"

    try:
        with ThreadPoolExecutor(11) as pool:
            first = pool.submit(post, url, "/api/judge", {})
            time.sleep(0.3)
            before = rss_mib()
            waiting = [pool.submit(send_all) for _ in range(10)]
            time.sleep(1.5)
            grown = rss_mib() - before
            answers = [w.result() for w in waiting]
            assert first.result() == (200, {"judged": True})
    finally:
        server.stop(srv)
    assert grown < 60, f"the server grew {grown:.0f} MiB with ten bodies waiting"
    assert all(a in (b"HTTP/1.1 503 Service Unavailable", b"reset", b"") for a in answers), answers


def test_a_case_inputs_answer_is_made_once_and_shared() -> None:
    # A long case's answer is 89 MB: twenty clients asking at once hold one copy, not
    # twenty (before, each request made its own, and 20 of them peaked at 2.8 GB).
    first = api.handle("GET", "/api/inputs", f"case={SMOKE[1].id}", b"", limits=api.Limits())
    again = api.handle("GET", "/api/inputs", f"case={SMOKE[1].id}", b"", limits=api.Limits())
    assert first[0] == 200 and first[1] is again[1]
    assert json.loads(first[1])["case"] == SMOKE[1].id
