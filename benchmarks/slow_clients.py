"""Hold slow clients against a server and time what everyone else gets meanwhile.

    python benchmarks/slow_clients.py http://127.0.0.1:8000 [--trickle 20] [--idle 20]
                                   [--hold 30] [--path /api/info]

`--trickle` clients send a request head one byte a second, `--idle` clients connect and send
nothing; each tries to hold its connection for `--hold` seconds. Meanwhile a probe sends a
normal GET of `--path` every 0.2 s on a new connection. Prints, as JSON: when the server
closed each kind of slow client (seconds after it connected; null = still open at --hold)
and what it answered them, and the probe's worst and median latency. docs/serving.md's
figures come from this script.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import threading
import time
from urllib.parse import urlsplit


def _slow(host: str, port: int, trickle: bool, hold: float, out: list) -> None:
    t0 = time.monotonic()
    s = socket.create_connection((host, port))
    s.settimeout(0.5)
    head = f"GET /demo/index.html HTTP/1.1\r\nHost: {host}\r\nX-Pad: {'a' * 64}\r\n\r\n".encode()
    got, closed, i = b"", None, 0
    while time.monotonic() - t0 < hold:
        if trickle and i < len(head):
            try:
                s.sendall(head[i : i + 1])
            except OSError:
                closed = time.monotonic() - t0
                break
            i += 1
        try:
            data = s.recv(65536)
        except TimeoutError:
            time.sleep(0.5)
            continue
        except OSError:
            closed = time.monotonic() - t0
            break
        if not data:
            closed = time.monotonic() - t0
            break
        got += data
    s.close()
    out.append({"closed_after_s": closed, "answer": got.split(b"\r\n", 1)[0].decode() or None})


def _probe(host: str, port: int, path: str, until: float, latencies: list) -> None:
    while time.monotonic() < until:
        t = time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=10) as s:
                head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                s.sendall(head.encode())
                while s.recv(65536):
                    pass
            latencies.append(time.monotonic() - t)
        except OSError:
            latencies.append(float("inf"))
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--trickle", type=int, default=20)
    parser.add_argument("--idle", type=int, default=20)
    parser.add_argument("--hold", type=float, default=30.0)
    parser.add_argument("--path", default="/api/info")
    args = parser.parse_args()
    url = urlsplit(args.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    results: dict[str, list] = {"trickle": [], "idle": []}
    threads = [
        threading.Thread(
            target=_slow, args=(host, port, kind == "trickle", args.hold, results[kind])
        )
        for kind, n in (("trickle", args.trickle), ("idle", args.idle))
        for _ in range(n)
    ]
    for t in threads:
        t.start()
    time.sleep(0.5)  # every slow client connected before the probe starts
    latencies: list[float] = []
    _probe(host, port, args.path, time.monotonic() + args.hold - 1, latencies)
    for t in threads:
        t.join()

    def summary(rows: list) -> dict:
        closed = [r["closed_after_s"] for r in rows if r["closed_after_s"] is not None]
        return {
            "clients": len(rows),
            "closed": len(closed),
            "closed_after_s": [round(min(closed), 1), round(max(closed), 1)] if closed else None,
            "answers": sorted({r["answer"] for r in rows if r["answer"]}),
        }

    print(
        json.dumps(
            {
                "trickle": summary(results["trickle"]),
                "idle": summary(results["idle"]),
                "probe_requests": len(latencies),
                "probe_worst_ms": round(max(latencies) * 1e3, 1),
                "probe_median_ms": round(statistics.median(latencies) * 1e3, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
