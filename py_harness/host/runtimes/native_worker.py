"""`python -m py_harness.host.runtimes.native_worker IMPLEMENTATION`: the harness service on a
native backend (host/gpu/native.py: "dawn" or "wgpu") in a child process of its own, speaking
the worker protocol of workers.py on stdin / stdout.

The device is requested before the ready line, so a missing driver fails the start with
the implementation's own words.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence

from ... import errors
from ...gpu.device import Bytes
from ...service import ENTRIES
from .sessions import native_service
from .workers import RS


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(
            "usage: python -m py_harness.host.runtimes.native_worker IMPLEMENTATION",
            file=sys.stderr,
        )
        return 2
    # The protocol gets the real stdout; everything else printed, by Python or by native
    # code, goes to stderr.
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)

    def say(
        call_id: int | None,
        status: str,
        value: str,
        stack: str | None = None,
        blobs: Sequence[Bytes] = (),
    ) -> None:
        fields = [call_id, status, value, stack]
        if blobs:
            fields.append([memoryview(b).nbytes for b in blobs])
        protocol.write((RS + json.dumps(fields) + "\n").encode())
        for blob in blobs:
            protocol.write(blob)
        protocol.flush()

    loop = asyncio.new_event_loop()
    t0 = time.perf_counter()
    try:
        service = native_service(argv[0])
        loop.run_until_complete(service.device())
    except Exception as exc:
        typed = errors.record(exc)
        say(None, "error", typed or f"{type(exc).__name__}: {exc}", traceback.format_exc())
        return 1
    say(None, "ok", json.dumps({"totalMs": round((time.perf_counter() - t0) * 1e3, 1)}), None)
    stdin = sys.stdin.buffer
    while line := stdin.readline():
        call_id, entry, request_json, *more = json.loads(line)
        blobs = [stdin.read(n) for n in more[0]] if more else None  # workers.py: the framing
        try:
            if blobs is not None:
                call = service.call_blobs(entry, request_json, blobs)
                value, out = loop.run_until_complete(call)
                say(call_id, "ok", value, None, out)
            elif entry in ENTRIES:
                say(call_id, "ok", loop.run_until_complete(getattr(service, entry)(request_json)))
            else:
                say(call_id, "error", f"no entry {entry!r} (has: {', '.join(ENTRIES)})", None)
        except Exception as exc:  # a typed error's record, else the traceback, as the page's
            say(call_id, "error", errors.record(exc) or traceback.format_exc(), None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
