"""The plugin's `harness` sessions go from one test module to the next (SessionPool): a
healthy one is handed on, one that does not answer a ping or belongs to a
`harness_private` module is closed, and every session is closed by the end."""

from __future__ import annotations

from typing import Any

from py_harness.host.pytest_plugin import SessionPool


class FakeSession:
    def __init__(self, n: int) -> None:
        self.n, self.answers, self.closed = n, True, False

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]:
        assert entry == "ping" and not self.closed
        if not self.answers:
            raise RuntimeError("the page crashed")
        return {}


class FakeRuntime:
    def __init__(self) -> None:
        self.opened: list[FakeSession] = []

    def new_session(self, base_url: str) -> FakeSession:
        self.opened.append(FakeSession(len(self.opened)))
        return self.opened[-1]

    def close_session(self, session: FakeSession) -> None:
        session.closed = True


def test_a_healthy_session_goes_to_the_next_module() -> None:
    rt = FakeRuntime()
    pool = SessionPool({"dawn": rt})  # type: ignore[dict-item]
    first = pool.take("dawn", "")
    pool.give("dawn", first, keep=True)
    assert pool.take("dawn", "") is first and len(rt.opened) == 1 and not first.closed


def test_unhealthy_or_private_sessions_are_closed() -> None:
    rt = FakeRuntime()
    pool = SessionPool({"node": rt})  # type: ignore[dict-item]
    crashed = pool.take("node", "")
    crashed.answers = False
    pool.give("node", crashed, keep=True)
    private = pool.take("node", "", private=True)
    assert private is not crashed and crashed.closed
    pool.give("node", private, keep=False)
    assert private.closed and pool.take("node", "") not in (crashed, private)
    assert len(rt.opened) == 3


def test_a_private_module_leaves_the_idle_session_to_the_next() -> None:
    """A private module (its sessions crash, or fill with mutated pipelines) gets a new
    session; the one the module before it compiled waits for the module after it."""
    rt = FakeRuntime()
    pool = SessionPool({"chromium": rt})  # type: ignore[dict-item]
    compiled = pool.take("chromium", "")
    pool.give("chromium", compiled, keep=True)
    private = pool.take("chromium", "", private=True)
    assert private is not compiled and not compiled.closed
    pool.give("chromium", private, keep=False)
    assert private.closed and pool.take("chromium", "") is compiled


def test_one_idle_session_per_runtime_and_all_closed_at_the_end() -> None:
    runtimes = {"dawn": FakeRuntime(), "chromium": FakeRuntime()}
    pool = SessionPool(runtimes)  # type: ignore[arg-type]
    a, b, c = pool.take("dawn", ""), pool.take("dawn", ""), pool.take("chromium", "")
    for name, s in (("dawn", a), ("dawn", b), ("chromium", c)):
        pool.give(name, s, keep=True)
    assert b.closed and not a.closed and not c.closed  # dawn already had an idle one
    pool.close()
    assert a.closed and c.closed
    assert pool.take("dawn", "") not in (a, b)  # a new one: nothing idle after close
