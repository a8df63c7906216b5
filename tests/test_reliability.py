"""Faults: a hung or crashed page, a lost device and bad numbers fail alone and loudly;
the harness recovers and the next case runs."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from py_harness.config import ConfigError
from py_harness.host import exchange, paths, variants
from py_harness.host.dist import snapshot
from py_harness.host.engine import evaluate
from py_harness.host.judge.cases import CONTROL, Case
from py_harness.host.judge.inputs import make_inputs
from py_harness.host.runtimes import sessions
from py_harness.host.runtimes.sessions import (
    BrowserSession,
    PageError,
    PageSession,
    Session,
    staged_blobs,
)
from py_harness.host.wire import run_on, tensor_blobs

# Its tests crash, hang and rewire their sessions: none is handed to the next module.
pytestmark = [pytest.mark.browser, pytest.mark.harness_private]
SMALL = Case(16, 17, 17, num_heads=2, num_kv_heads=2)


def test_pyodide_runtimes_start_from_the_snapshot(harness: Session) -> None:
    """Chromium, Firefox and Node run the page's Python in Pyodide: each restores Pyodide's
    memory from the build's snapshot (host/dist/snapshot.py) instead of starting Python."""
    timings = getattr(harness, "load_timings", {})
    if "pyodideLoadMs" not in timings:
        pytest.skip(f"{harness.runtime} runs no Pyodide")
    if not (paths.dist_dir() / snapshot.SNAPSHOT_NAME).is_file():
        pytest.skip("no Pyodide snapshot was built (no Node)")
    assert timings["snapshot"] is True and "snapshotError" not in timings, timings


def test_device_loss_is_reported_and_the_next_case_gets_a_new_device(harness: Session) -> None:
    assert evaluate(SMALL, harness).passed
    assert harness.call("destroy_device", {})["destroyed"]
    result = evaluate(SMALL, harness)  # the service sees the loss and asks for a device
    assert result.passed, result.failures()


def test_device_destroyed_mid_run_fails_that_run_only(harness: Session) -> None:
    if not isinstance(harness, BrowserSession):
        pytest.skip("calls run one at a time in-process; the page can overlap two")
    import base64
    import json

    x = make_inputs(CONTROL)
    request = {
        "config": CONTROL.config().to_dict(),
        "tensors": {n: base64.b64encode(a.tobytes()).decode() for n, a in x.items()},
    }
    # Start a case, then destroy the device while it is in flight.
    first, destroyed = harness.page.evaluate(
        """async ([request]) => {
            const run = window.runHarness('run_case', request);
            await new Promise((r) => setTimeout(r, 0));
            const kill = window.runHarness('destroy_device', '{}');
            return [await run, await kill];
        }""",
        [json.dumps(request)],
    )
    assert destroyed[0] == "ok"
    if first[0] == "error":  # it may also have finished before the loss: both are fine
        assert "lost" in first[1] or "destroyed" in first[1] or "GPUError" in first[1], first[1]
    assert evaluate(SMALL, harness).passed


@pytest.mark.parametrize("where", ["q", "v", "mask"])
def test_nan_and_inf_inputs_are_refused_before_dispatch(harness: Session, where: str) -> None:
    case = Case(16, 17, 17, num_heads=2, num_kv_heads=2, mask="full")
    x = make_inputs(case)
    x[where].reshape(-1)[5] = np.nan if where != "mask" else np.inf
    with pytest.raises(ConfigError) as err:  # the same class from a page, Node or a worker
        run_on(harness, case.config(), x)
    assert err.value.argument == where and "at flat index 5" in err.value.detail, err.value


def test_a_nan_in_the_last_float_of_a_large_input_is_refused(harness: Session) -> None:
    # q spans more than one of the page's scan chunks (browser.JsBytes.SCAN_CHUNK, 1 MiB):
    # the last float lies in the last, partial one.
    case = Case(64, 4200, 8, num_heads=1, num_kv_heads=1)
    x = make_inputs(case)
    last = x["q"].size - 1
    assert 4 * x["q"].size > 1 << 20 and (4 * x["q"].size) % (1 << 20)
    x["q"].reshape(-1)[last] = np.nan
    with pytest.raises(ConfigError) as err:
        run_on(harness, case.config(), x)
    assert err.value.argument == "q", err.value
    assert f"holds nan at flat index {last}" in err.value.detail, err.value


def test_mask_may_hold_minus_inf(harness: Session) -> None:
    case = Case(32, 40, 64, batch=2, mask="rows-inf")
    result = evaluate(case, harness)
    assert result.passed, result.failures()
    o = result.outputs["o"]  # rows masked with -inf: exactly zero, not NaN
    assert np.isfinite(o).all() and (o == 0).any()


def test_a_large_request_goes_by_fetch_and_a_lost_one_fails_clearly(
    harness: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not isinstance(harness, BrowserSession):
        pytest.skip("only a page fetches its requests")
    box = exchange.for_url(harness._base_url)
    assert box is not None, "the plugin's pages come from a server in this process"
    taken = []
    take = box.take
    monkeypatch.setattr(box, "take", lambda path: taken.append(take(path)) or taken[-1])
    monkeypatch.setattr(sessions, "INLINE_REQUEST_MAX", 0)  # every request by fetch
    result = evaluate(SMALL, harness)
    assert result.passed, result.failures()
    # The page's GET took the body; the session's clean-up found nothing left.
    assert taken[0] is not None and taken[-1] is None and box.waiting() == 0
    status, message, _ = harness.page.evaluate(
        "(url) => window.runHarnessFrom('ping', url)", harness._base_url + exchange.PREFIX + "gone"
    )
    assert status == "error" and "did not arrive" in message and "HTTP 404" in message


def test_tensors_go_as_bytes_both_ways_and_a_lost_frame_fails_clearly(
    harness: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page this process serves fetches a case's tensors as one frame of bytes and POSTs
    its outputs back as another (exchange.py); a request or reply slot that is gone fails
    the call with what went missing."""
    if not isinstance(harness, PageSession):
        pytest.skip("only a page fetches its tensors and posts its outputs")
    assert harness.takes_blobs, "the plugin's pages come from a server in this process"
    box = exchange.for_url(harness._base_url)
    assert box is not None
    delivered: list[int] = []
    deliver = box.deliver
    monkeypatch.setattr(box, "deliver", lambda p, b: delivered.append(len(b)) or deliver(p, b))
    result = evaluate(SMALL, harness)
    assert result.passed, result.failures()
    outputs = sum(a.nbytes for a in result.outputs.values())
    assert len(delivered) == 1 and outputs < delivered[0] < outputs + 2**16
    assert box.waiting() == 0
    gone = harness._base_url + exchange.PREFIX + "gone"
    with pytest.raises(PageError, match="the request did not arrive: .*HTTP 404"):
        harness._run("run_case", "runHarnessExchange", gone, gone)
    cfg, x = SMALL.config(), make_inputs(SMALL)
    request = {
        "config": cfg.to_dict(),
        "sources": variants.sources("seed"),
        "variant": "seed",
        "tensors": {n: i for i, n in enumerate(x)},
    }
    with staged_blobs(harness._base_url, request, tensor_blobs(x.values())) as staged:
        box.collect(staged.reply_url.removeprefix(harness._base_url))  # the slot closes
        with pytest.raises(PageError, match="the reply did not go back: POST .*HTTP 404"):
            harness._run("run_case", "runHarnessExchange", staged.request_url, staged.reply_url)
    assert box.waiting() == 0
    assert evaluate(SMALL, harness).passed  # and the page goes on


def test_a_reply_twice_its_request_fits_its_slot(harness: Session) -> None:
    """At head_dim 1 the LSE is as large as q, so a forward's outputs (o, LSE) are twice its
    inputs' q: the page's reply slot takes them (a slot of the request's size plus 1 MiB
    refused this reply with 413)."""
    if not isinstance(harness, PageSession):
        pytest.skip("only a page posts its outputs to a reply slot")
    case = Case(1, 16640, 1, num_heads=32, num_kv_heads=1)  # q and the LSE 2.03 MiB each
    cfg, x = case.config(), make_inputs(case)
    request = {
        "config": cfg.to_dict(),
        "sources": variants.sources("seed"),
        "variant": "seed",
        "backward": False,
        "tensors": {"q": 0, "k": 1, "v": 2},
    }
    reply, blobs = harness.call_blobs("run_case", request, tensor_blobs([x[n] for n in "qkv"]))
    got = {n: len(blobs[i]) for n, i in reply["outputs"].items()}
    assert got == {"o": x["q"].nbytes, "lse": x["q"].nbytes}


def test_hung_page_fails_that_call_and_the_next_gets_a_fresh_page(harness: Session) -> None:
    if not isinstance(harness, BrowserSession):
        pytest.skip("only a browser page can hang")
    pages = harness.pages_opened
    harness.timeout_s, saved = 3.0, harness.timeout_s
    try:
        harness.page.evaluate("() => { setTimeout(() => { for (;;) {} }, 0); }")
        with pytest.raises(PageError, match="did not answer within 3 s"):
            harness.call("ping", {})
    finally:
        harness.timeout_s = saved
    assert evaluate(SMALL, harness).passed
    assert harness.pages_opened == pages + 1


def test_crashed_page_fails_that_call_and_the_next_gets_a_fresh_page(harness: Session) -> None:
    if not isinstance(harness, BrowserSession) or harness.runtime != "chromium":
        pytest.skip("chrome://crash is Chromium's")
    pages = harness.pages_opened
    with contextlib.suppress(Exception):  # the navigation itself reports the crash
        harness.page.goto("chrome://crash")
    with pytest.raises(PageError, match="crashed|did not answer|closed"):
        harness.call("ping", {}) if not harness._crashed else _raise_crashed(harness)
    assert evaluate(SMALL, harness).passed
    assert harness.pages_opened == pages + 1


def _raise_crashed(harness: BrowserSession) -> None:
    # call() reopens a crashed page before it starts; report the crash the way it would.
    raise PageError("ping", "the page crashed", None)


def test_a_case_over_the_device_limits_fails_alone(harness: Session) -> None:
    # q alone would be 2 GiB: over maxStorageBufferBindingSize on every adapter here. The
    # page refuses it from the config before it asks for tensors or touches the GPU.
    big = Case(128, 2**21, 16, num_heads=2, num_kv_heads=2).config()
    with pytest.raises(ConfigError) as err:
        harness.call("run_case", {"config": big.to_dict(), "tensors": {}})
    assert "q / d_out: needs a 2147483648-byte buffer, over the device limit" in str(err.value)
    assert evaluate(SMALL, harness).passed
