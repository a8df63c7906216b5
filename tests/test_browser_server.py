"""Chromium on another machine: `py-harness browser-server` (runtimes/browser_server.py) and
`--browser-ws` (the chromium runtime's connect, runtimes/registry.py).

The end-to-end test starts a browser server in a subprocess and runs the smoke subset of the
case matrix on Chromium through it (`pytest --runtime chromium --browser-ws ... -m smoke
tests/test_kernels.py`, seed variant: about a minute here), then stops the server. Where this
machine allows it (root: `unshare -n`), the server runs in its own network namespace, whose
loopback is not this one's, as on another machine: the pages can then only reach the browser
through `expose_network`, which is what the test is for (Playwright's `launch-server` passes
every test below without the namespace and fails them all with it). The server's port is
forwarded into the namespace by a few lines of socket copying below.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from py_harness.host.runtimes.browser_server import launch_options, redact, with_launch_options
from py_harness.host.runtimes.chromium import chromium_launch_args
from py_harness.host.runtimes.registry import runtime
from tests.fakes import own_thread

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "py_harness", "browser-server", "--port", "0"]


def test_endpoint_carries_the_servers_launch_options() -> None:
    options = launch_options({"executable_path": "/opt/c", "headless": True, "args": ["--x"]})
    assert options == {"executablePath": "/opt/c", "headless": True, "args": ["--x"]}
    url = with_launch_options("ws://localhost:3000/token", options, host="gpu-1")
    parts = urllib.parse.urlsplit(url)
    assert (parts.netloc, parts.path) == ("gpu-1:3000", "/token")
    # Playwright's server reads the query parameter `launch-options` before any header.
    assert json.loads(urllib.parse.parse_qs(parts.query)["launch-options"][0]) == options
    assert redact(url) == "ws://gpu-1:3000/token"


def test_an_unreachable_server_is_named() -> None:
    endpoint = "ws://127.0.0.1:9/nobody-here?launch-options=%7B%7D"

    def connect() -> None:
        with runtime("chromium").launch(ws_endpoint=endpoint):
            pass

    # On a thread of its own: a browser test before this one in the process leaves the
    # plugin's Playwright (and its event loop) on the main thread, where a second sync
    # Playwright refuses to start.
    with pytest.raises(ConnectionError, match=r"ws://127\.0\.0\.1:9/nobody-here"):
        own_thread(connect)


def _isolated() -> bool:
    """Whether a subprocess can have a network namespace of its own here."""
    if not (shutil.which("unshare") and shutil.which("ip")):
        return False
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True)
    return probe.returncode == 0


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for s in (src, dst):  # either side's end ends both directions
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def _forward_into(pid: int, port: int) -> Iterator[int]:
    """A port on this loopback whose connections reach `port` on the loopback of process
    `pid`'s network namespace (each connection's thread enters the namespace: setns moves
    the calling thread only)."""
    ns = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    listener = socket.create_server(("127.0.0.1", 0))

    def connection(client: socket.socket) -> None:
        os.setns(ns, os.CLONE_NEWNET)
        with client, socket.create_connection(("127.0.0.1", port)) as upstream:
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()

    def accept() -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test is over
            while True:
                client, _ = listener.accept()
                threading.Thread(target=connection, args=(client,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        os.close(ns)


@pytest.fixture
def browser_server() -> Iterator[tuple[str, bool]]:
    """(endpoint, isolated): a browser server in a subprocess, in its own network namespace
    when `isolated`."""
    isolated = _isolated()
    command = SERVER
    if isolated:
        inner = " ".join(SERVER)
        command = ["unshare", "-n", "sh", "-c", f"ip link set lo up && exec {inner}"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        endpoint = proc.stdout.readline().strip()
        assert endpoint.startswith("ws://"), f"browser-server printed {endpoint!r}"
        with contextlib.ExitStack() as stack:
            if isolated:
                parts = urllib.parse.urlsplit(endpoint)
                port = stack.enter_context(_forward_into(proc.pid, parts.port or 0))
                endpoint = urllib.parse.urlunsplit(parts._replace(netloc=f"127.0.0.1:{port}"))
            yield endpoint, isolated
    finally:
        proc.terminate()  # SIGTERM: browser-server stops Playwright's server and its browsers
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.browser
@pytest.mark.slow
def test_smoke_matrix_through_a_browser_server(
    browser_server: tuple[str, bool],
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    try:
        chromium_launch_args()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    endpoint, isolated = browser_server
    record_property("isolated_network", isolated)
    out = tmp_path / "results.json"
    cmd = [sys.executable, "-m", "pytest", "tests/test_kernels.py", "-m", "smoke", "-q"]
    cmd += ["--runtime", "chromium", "--variant", "seed", "--browser-ws", endpoint]
    cmd += ["-p", "no:cacheprovider", "--harness-json", str(out)]
    # The child is a test run of its own: its own outputs folder, not this run's (nor an
    # xdist worker's identity).
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "HARNESS_OUTPUTS_DIR" and not k.startswith("PYTEST_XDIST")
    }
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    results = json.loads(out.read_text())
    statuses = {r["status"] for r in results["results"]}
    assert results["runtimes"] == ["chromium"] and statuses <= {"pass", "known", "unsupported"}
    assert sum(r["status"] == "pass" for r in results["results"]) >= 10
    if not isolated:
        warnings.warn(
            "the smoke subset passed through the browser server, but on this machine's own "
            "network (no `unshare -n` here), so expose_network went untested",
            stacklevel=1,
        )
