"""A bounded concurrent load on loopback: every response complete and correct.

50 clients at once, each fetching the Pyodide runtime and the wheel and exchanging
tensors with the API (inputs out, a judgement back), a fixed number of times. Bounded in
count and time; only 127.0.0.1.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import numpy as np
import pytest

from py_harness.host.judge.cases import SMOKE
from py_harness.host.judge.inputs import make_inputs

CLIENTS = 50
ROUNDS = 2  # per client: each round is 4 requests
CASE = SMOKE[1]  # d1-sq17-sk17-h4: small tensors, so the test measures the server


def _sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.slow
def test_fifty_clients_get_complete_correct_responses(harness_server: str) -> None:
    from py_harness.host.dist.build_wheel import build

    built = build(log=lambda _msg: None)
    host, port = urlsplit(harness_server).hostname, urlsplit(harness_server).port
    want = {
        "/pyodide/pyodide.asm.wasm": _sha("node_modules/pyodide/pyodide.asm.wasm"),
        f"/dist/{built.wheel.name}": _sha(str(built.wheel)),
    }
    expected_inputs = {n: a.tobytes() for n, a in make_inputs(CASE).items()}
    cfg = CASE.config().to_dict()

    def client(_i: int) -> tuple[int, int]:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        done, nbytes = 0, 0
        for _ in range(ROUNDS):
            for path, digest in want.items():
                conn.request("GET", path)
                resp = conn.getresponse()
                body = resp.read()
                assert resp.status == 200 and len(body) == int(resp.headers["Content-Length"])
                assert hashlib.sha256(body).hexdigest() == digest, path
                done, nbytes = done + 1, nbytes + len(body)
            conn.request("GET", f"/api/inputs?case={CASE.id}")
            got = json.loads(conn.getresponse().read())
            tensors = {n: base64.b64decode(v) for n, v in got["tensors"].items()}
            assert tensors == expected_inputs
            # Send the tensors back as if they were the GPU's outputs: the judgement must
            # come back whole and name every output.
            outputs = {"o": got["tensors"]["q"], "dq": got["tensors"]["q"]}
            outputs["dk"] = outputs["dv"] = got["tensors"]["k"]
            outputs["lse"] = base64.b64encode(np.zeros(68, "<f4").tobytes()).decode()
            body = json.dumps({"config": cfg, "inputs": got["tensors"], "outputs": outputs})
            conn.request("POST", "/api/judge", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            judged = json.loads(resp.read())
            assert resp.status == 200, judged
            assert {r["name"] for r in judged["reports"]} == {"o", "lse", "dq", "dk", "dv"}
            done += 2
        conn.close()
        return done, nbytes

    t0 = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(client, range(CLIENTS), timeout=600))
    seconds = time.perf_counter() - t0
    requests = sum(r[0] for r in results)
    assert requests == CLIENTS * ROUNDS * 4
    print(
        f"\n{CLIENTS} clients, {requests} requests, {sum(r[1] for r in results) / 2**20:.0f} MiB "
        f"in {seconds:.1f} s: all complete and correct"
    )
