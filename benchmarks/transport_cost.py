"""What a case's tensors cost on their way between the host and a session: run_on's wall
time against the service's own, the tensors as bytes beside the JSON (every session's way
since the pages' exchange: HarnessService.call_blobs) and as base64 (the session's
takes_blobs switched off).

    python3 benchmarks/transport_cost.py [--runtime wgpu,dawn,node,chromium,firefox]
        [--seq 4096] [--seq-k 4096] [--heads 16] [--head-dim 128] [--variant fast] [--runs 2]
        [--no-base64]

Prints per run: the wall time of run_on, the service's own time (service_total_ms: from
the request's arrival to the outputs, decoding base64 included), the difference, and the
service's time beyond the compiles and the GPU's (its timings_ms). The first run of each
runtime also compiles. The H200's figures are in docs/records/gpu.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from py_harness.config import AttentionConfig
from py_harness.host.dist.build_wheel import build
from py_harness.host.runtimes.registry import runtime
from py_harness.host.serving.server import start_server, stop
from py_harness.host.wire import run_on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtime", default="wgpu,dawn", help="comma-separated runtimes")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--seq-k", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--variant", default="fast")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--no-base64", action="store_true", help="only the bytes path")
    args = parser.parse_args()
    cfg = AttentionConfig(1, args.heads, args.seq, args.seq_k, args.head_dim)
    rng = np.random.default_rng(0)
    rows = {"q": args.seq, "k": args.seq_k, "v": args.seq_k, "d_out": args.seq}
    x = {
        n: rng.standard_normal((1, r, args.heads, args.head_dim), dtype=np.float32)
        for n, r in rows.items()
    }
    print(f"inputs {sum(a.nbytes for a in x.values()) / 2**20:.1f} MB", flush=True)
    build(log=lambda _msg: None)  # the pages' and Node's wheel
    server, base_url = start_server()
    try:
        for name in args.runtime.split(","):
            measure(name, base_url, cfg, x, args)
    finally:
        stop(server)


def measure(name: str, base_url: str, cfg: AttentionConfig, x: dict, args) -> None:  # noqa: ANN001
    rt = runtime(name)
    why = rt.missing()
    if why:
        print(f"{name}: skipped: {why}")
        return
    with rt.launch() as launched:
        session = launched.new_session(base_url if rt.needs_server else "")
        try:
            takes_blobs = session.takes_blobs
            ways = (True, False) if takes_blobs and not args.no_base64 else (takes_blobs,)
            for _ in range(args.runs):
                for blobs in ways:
                    session.takes_blobs = blobs
                    t = time.perf_counter()
                    reply = run_on(session, cfg, x, variant=args.variant)
                    wall = (time.perf_counter() - t) * 1e3
                    ms = reply["timings_ms"]
                    own = ms["service_total_ms"]
                    gpu = sum(ms.get(k, 0.0) for k in ("compile_ms", "forward_ms", "backward_ms"))
                    how = "bytes " if blobs else "base64"
                    print(
                        f"{name} {how} wall {wall:.1f} service {own:.1f} "
                        f"transport {wall - own:.1f} beyond GPU {own - gpu:.1f} ms",
                        flush=True,
                    )
        finally:
            launched.close_session(session)


if __name__ == "__main__":
    main()
