"""A minimal WebDriver BiDi client: JSON commands over one WebSocket, replies matched by id.

Firefox's built-in Remote Agent serves BiDi itself (the endpoint Playwright's moz-firefox
channel and geckodriver's BiDi use too), so driving it needs no driver binary; docs/runtimes.md,
"Firefox: why WebDriver BiDi", says why this beats Playwright and Selenium here.
Single-threaded use only: one command in flight at a time, no event subscriptions.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used, so that firefox_missing() can say it is absent
    from websockets.sync.client import ClientConnection


class BidiError(RuntimeError):
    """An error reply to a command, or an exception thrown by evaluated script."""

    def __init__(self, method: str, error: str, message: str, stack: str | None = None) -> None:
        super().__init__(f"BiDi {method}: {error}: {message}")
        self.error = error
        self.bidi_message = message
        self.stack = stack


class BidiConnection:
    """Commands over an open BiDi WebSocket (ws://host:port/session)."""

    def __init__(
        self,
        ws: ClientConnection,
        timeout_s: float,
        diagnose: Callable[[], str] = lambda: "",
    ) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self.timeout_s = timeout_s
        # Says why the browser went away (e.g. its log's tail) when the socket closes.
        self._diagnose = diagnose

    def command(
        self, method: str, params: dict[str, Any] | None = None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Send one command and wait for its reply; returns its `result`."""
        from websockets.exceptions import ConnectionClosed

        cmd_id = next(self._ids)
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        try:
            self._ws.send(json.dumps({"id": cmd_id, "method": method, "params": params or {}}))
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"BiDi {method}: no reply within {timeout:g} s")
                try:
                    msg = json.loads(self._ws.recv(timeout=remaining))
                except TimeoutError:
                    raise TimeoutError(f"BiDi {method}: no reply within {timeout:g} s") from None
                # Anything else is an event or the late reply of a command that timed out.
                if msg.get("id") == cmd_id:
                    break
        except ConnectionClosed as exc:
            raise ConnectionError(
                f"BiDi {method}: the browser closed the connection ({exc}){self._diagnose()}"
            ) from None
        if msg.get("type") == "error":
            raise BidiError(
                method, msg.get("error", "?"), msg.get("message", ""), msg.get("stacktrace")
            )
        return msg["result"]

    def call_function(
        self, context: str, declaration: str, *args: str, timeout_s: float | None = None
    ) -> Any:
        """Run `declaration` (a JS function of string arguments) in a browsing context and
        await its promise. Only primitive results come back: callers JSON.stringify."""
        reply = self.command(
            "script.callFunction",
            {
                "functionDeclaration": declaration,
                "arguments": [{"type": "string", "value": a} for a in args],
                "awaitPromise": True,
                "target": {"context": context},
                "resultOwnership": "none",
            },
            timeout_s,
        )
        if reply["type"] == "exception":
            details = reply["exceptionDetails"]
            raise BidiError("script.callFunction", "exception", details.get("text", ""))
        result = reply["result"]
        if result["type"] in ("undefined", "null"):
            return None
        if result["type"] not in ("string", "number", "boolean"):
            raise TypeError(f"script returned a {result['type']}; return a string instead")
        return result["value"]

    def close(self) -> None:
        self._ws.close()
