"""Runtimes that live in a child process, spoken to over its pipes.

Two children speak this protocol: `python -m py_harness.host.runtimes.native_worker dawn` (the
native backend on wgpudawn) and `node web/harness/node-harness.mjs` (the page's own Python in
Pyodide, on Dawn for Node). A child of its own keeps each implementation's Vulkan driver
choice and native library out of the host process (wgpu-native and Dawn export the same
C symbols), and a child that crashes or hangs costs one call, not the test session.

One JSON document per line:
  host -> child:  [id, entry, request_json]
  child -> host:  RS [id, status, value, stack]   (RS = "\\x1e"; id null: the ready line)
The child's first protocol line says whether it started; lines without RS are its
chatter (Pyodide's print, Dawn's warnings) and are kept only for error messages.
A child that takes blobs (both do; HarnessService.call_blobs) also reads
  host -> child:  [id, entry, request_json, [n1, n2, ...]] and then n1 + n2 + ... bytes
  child -> host:  RS [id, status, value, stack, [n1, ...]] and then those bytes
so that tensors cross as bytes, not as base64 inside JSON inside JSON: 128 MB of outputs
took 4.3 s through that here (base64 0.6 s out and 1.1 s back, two JSON encodings 0.9 s
each, two decodings 0.7 s in all).
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import queue
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ...gpu.device import Bytes
from ..paths import PACKAGE_DIR
from .sessions import Console, PageError, _AdapterName, page_error

RS = "\x1e"
# Chatter that says nothing about the run (docs/runtimes.md: both Dawn builds print it).
NOISE = ("XDG_RUNTIME_DIR",)


class WorkerSession(_AdapterName):
    """A runtime in a child process. A child that exits, or does not answer within the
    per-call timeout, fails that call alone: it is killed, and the next call starts a
    fresh one (as BrowserSession opens a fresh page)."""

    def __init__(
        self,
        command: Sequence[str],
        runtime: str,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 300.0,
        start_timeout_s: float = 120.0,
        cwd: Path = PACKAGE_DIR.parent,
        takes_blobs: bool = False,
    ) -> None:
        self.runtime = runtime
        self.takes_blobs = takes_blobs
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.children_started = 0
        self.load_timings: dict[str, Any] = {}
        self._command = list(command)
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen[str] | None = None
        self.console = Console()  # every child's stderr, as the chatter is, but kept longer
        self._open()

    def _open(self) -> None:
        self._replies: queue.Queue[list | None] = queue.Queue()
        self._chatter: collections.deque[str] = collections.deque(maxlen=40)
        self._proc = subprocess.Popen(
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._env,
            cwd=self._cwd,
        )
        self.children_started += 1
        self._pumps: list[threading.Thread] = []
        for stream, sink in ((self._proc.stdout, self._replies), (self._proc.stderr, None)):
            args = (stream, sink, self._chatter, self.console)
            self._pumps.append(threading.Thread(target=_pump, args=args, daemon=True))
            self._pumps[-1].start()
        status, value, stack, _ = self._wait(None, "start", self.start_timeout_s)
        if status != "ok":
            self.close()
            raise page_error("load", value, stack, self.runtime)
        self.load_timings = json.loads(value)

    def _wait(self, call_id: int | None, entry: str, timeout_s: float) -> list:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                reply = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                why = self._why(f"did not answer within {timeout_s:g} s")
                raise PageError(entry, why, None) from None
            if reply is None:  # its stdout ended (or went off the protocol: then kill it)
                code = None
                if self._proc is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        code = self._proc.wait(timeout=2.0)
                self.close()
                what = "broke the protocol" if code is None else f"exited with status {code}"
                raise PageError(entry, self._why(what), None)
            if reply[0] == call_id:
                return reply[1:]

    def _why(self, what: str) -> str:
        """What went wrong, with the child's last words: called once it is gone (close), when
        its stderr still holds what it said last, which the pump may not have read yet (its
        stdout can end first: the test of an exit mid-call lost them under load)."""
        for pump in self._pumps:
            pump.join(timeout=2.0)  # both pipes end with the child (or its heirs: bounded)
        said = "\n".join(self._chatter) or "(nothing on stderr)"
        return f"the {self.runtime} worker {what}; its last words:\n{said}"

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]:
        return self._call(entry, [json.dumps(request)], ())[0]

    def call_blobs(
        self, entry: str, request: dict[str, Any], blobs: Sequence[Bytes]
    ) -> tuple[dict[str, Any], list[bytes]]:
        """The entry with bytes beside the JSON (wire.Caller); for a child that takes them."""
        if not self.takes_blobs:
            raise ValueError(f"the {self.runtime} worker takes no blobs")
        lengths = [memoryview(b).nbytes for b in blobs]
        return self._call(entry, [json.dumps(request), lengths], blobs)

    def _call(
        self, entry: str, fields: list, blobs: Sequence[Bytes]
    ) -> tuple[dict[str, Any], list[bytes]]:
        """One call's reply and the blobs after it; an error reply raises PageError."""
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            self._open()
        call_id = next(self._ids)
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps([call_id, entry, *fields]) + "\n").encode())
            for blob in blobs:
                self._proc.stdin.write(blob)
            self._proc.stdin.flush()
        except OSError:  # the child died between calls; _wait reports how
            pass
        status, value, stack, out = self._wait(call_id, entry, self.timeout_s)
        if status != "ok":
            raise page_error(entry, value, stack, self.runtime)
        return json.loads(value), out

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdin is not None:
            with contextlib.suppress(OSError):  # a dead child's pipe may refuse the flush
                proc.stdin.close()


def _pump(
    stream: BinaryIO, sink: queue.Queue | None, chatter: collections.deque[str], console: Console
) -> None:
    """Read one of a child's pipes to its end (it then closes the pipe): protocol lines,
    with the blobs that follow them, into `sink` as [id, status, value, stack, blobs];
    the rest into `chatter` and `console`."""
    try:
        with stream:
            while line := stream.readline():
                if sink is not None and line.startswith(RS.encode()):
                    try:
                        reply = json.loads(line[1:])
                    except ValueError:
                        chatter.append(f"a protocol line that is not JSON: {line[:200]!r}")
                        break
                    lengths = reply[4] if len(reply) > 4 else []
                    blobs = [stream.read(n) for n in lengths]
                    if any(len(b) < n for b, n in zip(blobs, lengths, strict=True)):
                        break  # the child exited while sending: no reply, as if before it
                    sink.put([*reply[:4], blobs])
                    continue
                text = line.decode("utf-8", "replace")
                if text.strip() and not any(n in text for n in NOISE):
                    chatter.append(text.rstrip())
                    console.append(text.rstrip())
    finally:  # also off the protocol: the call fails now, not at its timeout
        if sink is not None:
            sink.put(None)  # end of stream: the child exited
