"""The child-process transport (host/runtimes/workers.py) with stand-in children: replies are
matched to calls, chatter stays out of the protocol, and a child that hangs, exits or
never starts fails one call alone with what it said; the next call gets a fresh child."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest

from py_harness.host.runtimes.registry import NODE_POLL_SPIN, NODE_POLL_SPIN_MS, Node
from py_harness.host.runtimes.sessions import PageError
from py_harness.host.runtimes.workers import WorkerSession

# A stand-in child: the real ones' protocol, and behaviours chosen by the entry name.
CHILD = textwrap.dedent(
    r"""
    import json, os, sys, time
    RS = "\x1e"
    out = sys.stdout.buffer
    def say(*fields, blobs=()):
        if blobs:
            fields = (*fields, [len(b) for b in blobs])
        out.write((RS + json.dumps(list(fields)) + "\n").encode())
        for b in blobs:
            out.write(b)
        out.flush()
    print("chatter before the ready line"); sys.stdout.flush()
    if os.environ.get("FAIL_START"):
        print("the driver said no", file=sys.stderr); sys.stderr.flush()
        say(None, "error", "harness failed to load: no adapter", "stack")
        sys.exit(1)
    say(None, "ok", json.dumps({"totalMs": 1.0, "pid": os.getpid()}), None)
    while line := sys.stdin.buffer.readline():
        call_id, entry, request, *lengths = json.loads(line)
        blobs = [sys.stdin.buffer.read(n) for n in lengths[0]] if lengths else []
        if entry == "reverse":  # blobs back in reverse order, each reversed, then chatter
            say(call_id, "ok", json.dumps({"got": len(blobs)}), None,
                blobs=[b[::-1] for b in reversed(blobs)])
            print("chatter after blobs"); sys.stdout.flush()
        elif entry == "short":  # says 100 bytes follow, sends 10, exits
            out.write((RS + json.dumps([call_id, "ok", "{}", None, [100]]) + "\n").encode())
            out.write(b"0123456789"); out.flush()
            sys.exit(5)
        elif entry == "garbage":  # a protocol line that is not JSON, then silence
            out.write((RS + "not json\n").encode()); out.flush()
            time.sleep(60)
        elif entry == "echo":
            print("chatter between replies"); sys.stdout.flush()
            say(call_id, "ok", json.dumps({"echo": json.loads(request), "pid": os.getpid()}), None)
        elif entry == "fail":
            say(call_id, "error", "Traceback: ValueError: bad", None)
        elif entry == "hang":
            time.sleep(60)
        elif entry == "exit":
            print("about to exit", file=sys.stderr); sys.stderr.flush()
            sys.exit(3)
        elif entry == "exit-late":  # exits at once; what it leaves behind speaks after
            import subprocess
            late = "import sys, time; time.sleep(0.5); print('said after', file=sys.stderr)"
            subprocess.Popen([sys.executable, "-c", late], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL)
            sys.exit(4)
    """
)


@pytest.fixture
def child() -> WorkerSession:
    session = WorkerSession([sys.executable, "-c", CHILD], "stand-in", timeout_s=5.0)
    yield session
    session.close()


def test_replies_match_calls_and_chatter_is_not_a_reply(child: WorkerSession) -> None:
    assert child.load_timings["totalMs"] == 1.0
    for i in range(3):
        assert child.call("echo", {"i": i})["echo"] == {"i": i}
    assert child.children_started == 1


def test_blobs_cross_as_bytes_whatever_bytes_they_hold() -> None:
    """Blobs holding the protocol's own separators (newline, RS), an empty one and a large
    one go to the child after the JSON and come back after its reply, byte for byte; the
    chatter after them stays chatter, and JSON calls still work around them. A child that
    exits partway through its blobs has given no reply."""
    session = WorkerSession(
        [sys.executable, "-c", CHILD], "stand-in", timeout_s=5.0, takes_blobs=True
    )
    try:
        blobs = [b"a\nb\x1e[1]\n", b"", bytes(range(256)) * 4099]
        reply, back = session.call_blobs("reverse", {}, [*blobs[:2], memoryview(blobs[2])])
        assert reply == {"got": 3}
        assert back == [b[::-1] for b in reversed(blobs)]
        assert session.call("echo", {"i": 1})["echo"] == {"i": 1}
        assert session.children_started == 1
        with pytest.raises(PageError, match="exited with status 5"):
            session.call_blobs("short", {}, [])  # its blob cut short: it exited, no reply
    finally:
        session.close()
    plain = WorkerSession([sys.executable, "-c", CHILD], "stand-in")
    try:
        with pytest.raises(ValueError, match="takes no blobs"):
            plain.call_blobs("reverse", {}, [])
    finally:
        plain.close()


def test_an_error_reply_raises_with_the_childs_message(child: WorkerSession) -> None:
    with pytest.raises(PageError, match="ValueError: bad"):
        child.call("fail", {})
    assert child.call("echo", {})["pid"] == child.load_timings["pid"]  # same child


def test_a_hung_child_fails_that_call_and_the_next_gets_a_fresh_one(child: WorkerSession) -> None:
    pid, child.timeout_s = child.load_timings["pid"], 1.0
    with pytest.raises(PageError, match="did not answer within 1 s"):
        child.call("hang", {})
    assert child.call("echo", {})["pid"] != pid
    assert child.children_started == 2


def test_a_child_that_exits_mid_call_fails_that_call_with_its_last_words(
    child: WorkerSession,
) -> None:
    with pytest.raises(PageError, match=r"exited with status 3[^$]*about to exit"):
        child.call("exit", {})
    assert child.call("echo", {"after": 1})["echo"] == {"after": 1}
    assert child.children_started == 2


def test_last_words_are_read_to_the_end_of_stderr(child: WorkerSession) -> None:
    # stdout ends first here (as it can under load with any child): the reply waits for
    # stderr's end, within 2 s
    with pytest.raises(PageError, match=r"exited with status 4[^$]*said after"):
        child.call("exit-late", {})


def test_a_child_off_the_protocol_fails_that_call_at_once(child: WorkerSession) -> None:
    child.timeout_s = 60.0
    t = time.monotonic()
    with pytest.raises(PageError, match=r"broke the protocol[^$]*not JSON: b'\\x1enot json"):
        child.call("garbage", {})
    assert time.monotonic() - t < 30
    assert child.call("echo", {"after": 1})["echo"] == {"after": 1}


def test_a_child_killed_between_calls_is_replaced_on_the_next(child: WorkerSession) -> None:
    pid = child.load_timings["pid"]
    os.kill(pid, signal.SIGKILL)
    child._proc.wait(timeout=5)  # dead before the call (a death during one fails it)
    assert child.call("echo", {})["pid"] != pid


def test_a_child_that_cannot_start_says_why() -> None:
    env = {**os.environ, "FAIL_START": "1"}
    with pytest.raises(PageError, match="no adapter") as err:
        WorkerSession([sys.executable, "-c", CHILD], "stand-in", env=env)
    assert err.value.page_stack == "stack"


def test_a_child_that_dies_before_its_ready_line_says_so() -> None:
    with pytest.raises(PageError, match=r"exited with status 4[^$]*cannot import"):
        dies = "import sys; print('cannot import', file=sys.stderr); sys.exit(4)"
        WorkerSession([sys.executable, "-c", dies], "stand-in")


def test_node_waits_for_the_gpu_on_a_timer_on_swiftshader_only() -> None:
    swiftshader = {"VK_ICD_FILENAMES": "/dawn/vk_swiftshader_icd.json"}
    gpu = {"VK_DRIVER_FILES": "/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json"}
    assert Node.environment(swiftshader)[NODE_POLL_SPIN] == NODE_POLL_SPIN_MS
    assert Node.options(swiftshader) and not Node.options(gpu)
    assert NODE_POLL_SPIN not in Node.environment(gpu)  # node-harness.mjs: spin throughout
    assert Node.environment({**swiftshader, NODE_POLL_SPIN: "7"})[NODE_POLL_SPIN] == "7"
