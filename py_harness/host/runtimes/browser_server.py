"""`py-harness browser-server`: Chromium for the harness on this machine (say, a GPU
machine), for test machines that connect with `--browser-ws ENDPOINT` (docs/scaling.md).

The server is Playwright's own: `playwright run-server` of the driver bundled with the
Python package, here with `--unsafe` so that a client's launch options may carry Chromium's
path and flags. For each connection it launches a Chromium and, when the client asks with
`expose_network`, tunnels the browser's connections to the client's network: the harness
pages are served on the *test* machine's loopback (serving/server.py binds 127.0.0.1), and
`http://127.0.0.1` is a secure context, which WebGPU needs. `playwright launch-server`
(one browser launched up front) would be the other choice, but it ignores `expose_network`
(Playwright 1.65: its pre-launched browser has no SOCKS proxy), so a browser on another
machine could not load the pages; tests/test_browser_server.py checks this with the server
in its own network namespace.

Chromium's path and flags are decided here, on the machine that runs the browser (its
HARNESS_CHROMIUM, runtimes/chromium.py's flags, `--chromium-arg`), and travel inside the
printed endpoint as its `launch-options` query parameter, which the server reads before any
header: clients pass the endpoint as printed and need no Chromium of their own.

`--unsafe` lets anyone who reaches the port start a program of their choice, so the
server listens on 127.0.0.1 unless told otherwise, and its path is a random token unless
given (as Playwright's launch-server does): reach it from other machines through an SSH
tunnel (`ssh -L`), or on a network you trust.

Ctrl-C or SIGTERM stops the server and the browsers it launched (stop()).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..arg_types import port
from .chromium import chromium_launch_args

READY_PREFIX = "Listening on "  # what run-server prints once it accepts connections
_WILDCARD = ("0.0.0.0", "::", "")


@dataclass
class BrowserServer:
    endpoint: str  # what clients pass to --browser-ws
    process: subprocess.Popen[str]


def server_command(host: str, port: int, path: str) -> list[str]:
    """Playwright's run-server on the Node driver bundled with the Python package, started
    directly rather than through `python -m playwright`, which does not pass signals on."""
    from playwright._impl._driver import compute_driver_executable

    node, cli = compute_driver_executable()
    where = ["--host", host, "--port", str(port), "--path", path]
    return [node, cli, "run-server", "--unsafe", *where]


def launch_options(launch_args: dict[str, Any]) -> dict[str, Any]:
    """chromium_launch_args() (Python keyword names) as the server's JSON launch options."""
    names = {
        "executable_path": "executablePath",
        "channel": "channel",
        "headless": "headless",
        "args": "args",
        "slow_mo": "slowMo",
    }
    return {names[k]: v for k, v in launch_args.items() if k in names}


def with_launch_options(listening: str, options: dict[str, Any], host: str | None = None) -> str:
    """The endpoint clients use: the server's URL with the launch options in its query, and
    `host` for its host when given."""
    parts = urllib.parse.urlsplit(listening)
    if host:
        parts = parts._replace(netloc=f"{host}:{parts.port}")
    query = urllib.parse.urlencode({"launch-options": json.dumps(options, separators=(",", ":"))})
    return urllib.parse.urlunsplit(parts._replace(query=query))


def redact(endpoint: str) -> str:
    """An endpoint without its query, for messages (the launch options are long)."""
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(endpoint)._replace(query=""))


@contextlib.contextmanager
def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    path: str | None = None,
    launch_args: dict[str, Any] | None = None,
    startup_timeout: float = 60.0,
) -> Iterator[BrowserServer]:
    """A browser server until the block ends. port 0 takes a free port; path None a random
    token. Raises RuntimeError, with what the server printed, if it does not start."""
    path = path or f"/{secrets.token_hex(16)}"
    options = launch_options(launch_args or chromium_launch_args())
    from playwright._impl._driver import get_driver_env

    # A session of its own, so that a terminal's Ctrl-C reaches this process only and the
    # server is stopped in one way, by stop().
    proc = subprocess.Popen(
        server_command(host, port, path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=get_driver_env(),
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    started = threading.Event()

    def read() -> None:
        # Until the server is up its lines are the start-up report (or why it failed);
        # after that they go to stderr as they come, so the pipe never fills.
        assert proc.stdout is not None
        for line in proc.stdout:
            if started.is_set():
                sys.stderr.write(f"browser-server: {line}")
            else:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        said: list[str] = []
        while True:
            try:
                line = lines.get(timeout=startup_timeout)
            except queue.Empty:
                raise RuntimeError(
                    f"no endpoint after {startup_timeout:.0f} s: {''.join(said)}"
                ) from None
            if line is None:
                raise RuntimeError(f"the server exited ({proc.wait()}): {''.join(said)}")
            if line.startswith(READY_PREFIX):
                started.set()
                break
            said.append(line)
        # Listening on every address, the server names itself "localhost", which reaches
        # nothing from elsewhere: this machine's name does.
        named = socket.gethostname() if host in _WILDCARD else None
        endpoint = with_launch_options(line[len(READY_PREFIX) :].strip(), options, named)
        yield BrowserServer(endpoint, proc)
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str], timeout: float = 15.0) -> None:
    """Stops a server started by serve(): SIGINT, on which the driver closes the browsers
    it launched and exits (SIGTERM only closes them: the driver keeps running once it has
    launched one, and it does not notice its stdin closing), then SIGKILL if it is still
    there after `timeout` seconds (its browsers then exit with their pipe to it)."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            continue


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="py-harness browser-server", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: reach it through an SSH tunnel)",
    )
    ap.add_argument("--port", type=port, default=0, help="port (default 0: a free one, printed)")
    ap.add_argument("--path", help="the endpoint's path (default: a random token)")
    ap.add_argument(
        "--chromium-arg",
        action="append",
        default=[],
        help="an extra Chromium flag (repeatable), e.g. --chromium-arg=--use-angle=vulkan",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        launch_args = chromium_launch_args(extra=tuple(args.chromium_arg))
    except FileNotFoundError as exc:
        print(f"browser-server: {exc}", file=sys.stderr)
        return 1
    # SIGTERM (a service manager, `kill`) ends the `with` below like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    path = None if args.path is None else "/" + args.path.lstrip("/")
    try:
        with serve(args.host, args.port, path, launch_args) as server:
            print(server.endpoint, flush=True)  # the one line on stdout: scripts read it
            print(
                "browser-server: Chromium for the harness; on the test machine:\n"
                f"  py-harness check --runtime chromium --browser-ws '{server.endpoint}'\n"
                "Ctrl-C stops it.",
                file=sys.stderr,
                flush=True,
            )
            return server.process.wait()
    except RuntimeError as exc:
        print(f"browser-server: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
