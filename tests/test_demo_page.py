"""web/index.html, the demo page, driven in headless Chromium.

One page for the module (Pyodide start-up and pipeline compilation happen once): it loads
and shows the adapter, a clicked run shows the errors the Python API computes for the same
inputs, the form refuses invalid values with the API's message, the smoke suite passes.
A second browser without --enable-unsafe-webgpu must get the explanation. Screenshots go
to test-results/.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from py_harness.config import AttentionConfig, ConfigError, validate
from py_harness.host import compare
from py_harness.host.cases import SMOKE
from py_harness.host.dropout import dropout_multiplier
from py_harness.host.evaluate import OUTPUTS, references, run_on
from py_harness.host.sessions import ROOT

pytestmark = pytest.mark.browser

RESULTS = ROOT / "test-results"
LOAD_TIMEOUT_MS = 120_000  # Pyodide start + SwiftShader pipeline compiles on 2 busy cores


def shot(page: Any, name: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    page.screenshot(path=str(RESULTS / name), full_page=True)


class DemoSession:
    """The demo page speaks the harness API too (it loads harness.js): a Session on it."""

    runtime = "chromium"

    def __init__(self, page: Any) -> None:
        self.page = page

    def call(self, entry: str, request: dict[str, Any]) -> dict[str, Any]:
        status, value, _ = self.page.evaluate(
            "([e, r]) => window.runHarness(e, r)", [entry, json.dumps(request)]
        )
        assert status == "ok", value
        return json.loads(value)


@pytest.fixture(scope="module")
def demo(chromium: Any, harness_server: str) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=harness_server)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # Offline: every request goes to the harness server (data: URLs never hit the network).
    page.on(
        "request",
        lambda r: r.url.startswith((harness_server, "data:")) or errors.append(f"fetched {r.url}"),
    )
    t0 = time.perf_counter()
    page.goto(f"{harness_server}/web/index.html")
    page.wait_for_function("document.body.dataset.state !== 'loading'", timeout=LOAD_TIMEOUT_MS)
    state = page.evaluate("document.body.dataset.state")
    assert state == "ready", page.inner_text("main")[:2000]
    timings = {"ready_s": time.perf_counter() - t0, **page.evaluate("window.demo.stageTimes")}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "demo_load_timings.json").write_text(json.dumps(timings, indent=1))
    yield page
    assert not errors, errors
    context.close()


def test_loads_and_shows_adapter(demo: Any) -> None:
    stages = demo.eval_on_selector_all(
        "#stages li", "els => els.map(e => [e.dataset.stage, e.dataset.status])"
    )
    assert [s for _, s in stages] == ["done"] * 5, stages
    assert all(demo.inner_text(f"#stages li[data-stage={s}] .time") for s, _ in stages)
    reply = DemoSession(demo).call("adapter", {})
    for key in ("vendor", "architecture"):
        assert demo.inner_text(f"#adapter [data-info={key}]") == reply["info"][key]
    assert "maxStorageBufferBindingSize" in demo.inner_text("#adapter")
    assert "timestamp-query" in demo.inner_text("#adapter .chips")
    assert demo.eval_on_selector_all(
        "select[name=variant] option", "os => os.map(o => o.value)"
    ) == list(reply["variants"])
    shot(demo, "demo_loaded.png")


def _shown_errors(page: Any) -> dict[str, dict[str, str]]:
    return page.eval_on_selector_all(
        "#errors tr[data-output]",
        """rows => Object.fromEntries(rows.map(r => [r.dataset.output, Object.fromEntries(
            [...r.querySelectorAll('[data-field]')].map(td => [td.dataset.field, td.textContent])
        )]))""",
    )


def test_run_agrees_with_python_api(demo: Any) -> None:
    demo.click("#run")
    demo.wait_for_function(
        "['done', 'error'].includes(document.body.dataset.run)", timeout=LOAD_TIMEOUT_MS
    )
    assert demo.evaluate("document.body.dataset.run") == "done", demo.inner_text("#run-status")
    run = demo.evaluate(
        "(({config, variant, inputs, timings_ms, timing_source}) => "
        "({config, variant, inputs, timings_ms, timing_source}))(window.demo.lastRun)"
    )
    cfg = AttentionConfig.from_dict(run["config"])
    assert (cfg.batch, cfg.num_heads, cfg.kv_heads, cfg.seq_q, cfg.seq_k, cfg.head_dim) == (
        1,
        4,
        2,
        113,
        203,
        59,
    )
    shapes = {
        "q": (cfg.batch, cfg.seq_q, cfg.num_heads, cfg.head_dim),
        "k": (cfg.batch, cfg.seq_k, cfg.kv_heads, cfg.head_dim),
    }
    shapes |= {"v": shapes["k"], "d_out": shapes["q"]}
    x = {
        n: np.frombuffer(base64.b64decode(b), "<f4").reshape(shapes[n])
        for n, b in run["inputs"].items()
    }
    # The Python API on the same inputs: run_case through the page, judged on the host.
    reply = run_on(DemoSession(demo), cfg, x, variant=run["variant"])
    ref64, ref32 = references(cfg, x, np.float64), references(cfg, x, np.float32)
    shown = _shown_errors(demo)
    assert set(shown) == set(OUTPUTS)
    for name in OUTPUTS:
        want = compare.judge(name, reply["arrays"][name], ref64[name], ref32[name])
        got = shown[name]
        assert got["passed"] == ("pass" if want.passed else "FAIL"), name
        for field in ("max_abs_err", "max_rel_err", "bound"):
            # The page shows 3 significant digits.
            assert float(got[field]) == pytest.approx(getattr(want, field), rel=6e-3), (name, field)
    assert demo.inner_text("#verdict") == "PASS"

    # GFLOP/s by FlashAttention's count: 4*B*H*Sq*Sk*D, halved for causal.
    fwd_flops = 4 * 1 * 4 * 113 * 203 * 59 / 2
    cell = demo.inner_text("#timing tr[data-pass=forward] td:nth-child(3)")
    assert float(cell) == pytest.approx(
        fwd_flops / (run["timings_ms"]["forward_ms"] * 1e6), abs=0.006
    )
    label = "GPU timestamps" if run["timing_source"] == "timestamp-query" else "wall clock"
    assert label in demo.inner_text("#timing-note")
    assert demo.locator("#weights canvas").count() == 1
    assert demo.locator("#maps canvas").count() == 8  # O, dQ, dK, dV: value and error
    shot(demo, "demo_run.png")


def test_invalid_value_shows_python_message(demo: Any) -> None:
    def message_for(**change: Any) -> str:
        base = dict(batch=1, num_heads=4, num_kv_heads=2, seq_q=113, seq_k=203, head_dim=59)
        with pytest.raises(ConfigError) as err:
            validate(AttentionConfig(**(base | change), causal=True))
        return str(err.value)

    for field, value in (("num_kv_heads", 3), ("head_dim", 129)):
        demo.fill(f"input[name={field}]", str(value))
        want = message_for(**{field: value})
        demo.wait_for_function(
            "t => document.querySelector('#form-error').textContent === t", arg=want
        )
        assert demo.get_attribute(f"input[name={field}]", "aria-invalid") == "true"
        assert demo.is_disabled("#run")
        assert f"{field}={value}" in demo.evaluate("location.search")
    demo.fill("input[name=num_kv_heads]", "2")
    demo.fill("input[name=head_dim]", "59")
    demo.wait_for_function("document.querySelector('#form-error').textContent === ''")
    demo.wait_for_function("!document.querySelector('#run').disabled")


def test_smoke_suite_passes(demo: Any) -> None:
    t0 = time.perf_counter()
    demo.click("#smoke")
    demo.wait_for_function("document.body.dataset.smoke === 'done'", timeout=LOAD_TIMEOUT_MS)
    rows = demo.eval_on_selector_all(
        "#smoke-table tbody tr", "rs => rs.map(r => [r.dataset.case, r.dataset.passed])"
    )
    assert [c for c, _ in rows] == [c.id for c in SMOKE]
    (RESULTS / "demo_smoke_seconds.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
    shot(demo, "demo_smoke.png")

    demo.click("#copy-json")
    demo.wait_for_function("document.querySelector('#copy-status').textContent !== ''")
    copied = json.loads(demo.evaluate("navigator.clipboard.readText()"))
    assert [r["case"] for r in copied["results"]] == [c.id for c in SMOKE]
    table = demo.inner_text("#smoke-table")
    # Every row passes, except a listed known failure, which must fail (strict, as in pytest).
    for r, (_, passed) in zip(copied["results"], rows, strict=True):
        assert r["passed"] != bool(r.get("known_failure")), f"{r['case']}\n{table}"
        assert passed == ("true" if r["passed"] else "false")
        assert len(r["reports"]) == len(OUTPUTS)


def test_url_restores_the_form(demo: Any, harness_server: str) -> None:
    page = demo.context.new_page()
    # Restoring the form needs no Python: keep Pyodide from booting (seconds of busy main
    # thread) in a page that is closed right away.
    page.route("**/pyodide/**", lambda route: route.abort())
    try:
        query = "batch=2&num_heads=6&num_kv_heads=3&causal=0&window=17&mask=keypad&input_seed=9"
        # No need to wait for Pyodide: restoring the form is the first thing demo.js does.
        page.goto(f"{harness_server}/web/index.html?{query}", wait_until="commit")
        page.wait_for_selector("#stages li")
        values = page.evaluate(
            "Object.fromEntries([...document.querySelector('#case-form').elements]"
            ".filter(e => e.name).map(e => [e.name, e.type === 'checkbox' ? e.checked : e.value]))"
        )
        assert values | {"batch": "2", "num_heads": "6", "num_kv_heads": "3"} == values
        assert (values["causal"], values["window"], values["mask"]) == (False, "17", "keypad")
        assert values["input_seed"] == "9" and values["seq_q"] == "113"
    finally:
        page.close()


def test_inputs_are_seeded_and_masks_mean_what_the_harness_means(demo: Any) -> None:
    got = demo.evaluate(
        """async () => {
            const d = await import('/web/demo-data.js');
            const cfg = {batch: 3, num_heads: 2, num_kv_heads: 1, seq_q: 11, seq_k: 20,
                         head_dim: 5, causal: false, causal_offset: 0, window: 0,
                         dropout_p: 0.3, seed: 77};
            const sum = (a) => Array.from(a).join(',');
            const a = d.makeInputs(cfg, 'keypad', 5), b = d.makeInputs(cfg, 'keypad', 5);
            const c = d.makeInputs(cfg, 'keypad', 6);
            const rows = d.makeInputs(cfg, 'rows', 5).mask;
            const keep = [];
            for (let b = 0; b < 3; b++) for (let h = 0; h < 2; h++) {
                const k = d.dropoutKeep(0.3, 77, 2, b, h);
                for (let i = 0; i < 11; i++) for (let j = 0; j < 20; j++) keep.push(k(i, j));
            }
            return {same: sum(a.q) === sum(b.q) && sum(a.mask) === sum(b.mask),
                    differs: sum(a.q) !== sum(c.q), keypad: Array.from(a.mask, String),
                    rows: Array.from(rows, String), keep};
        }"""
    )
    assert got["same"] and got["differs"]
    # evaluate._make_mask's keypad: batch b sees its first sk - 7b - 3 keys.
    want = np.zeros((3, 1, 1, 20), np.float32)
    for b in range(3):
        want[b, ..., 20 - 7 * b - 3 :] = -np.inf
    assert np.array_equal(np.array(got["keypad"], float).reshape(want.shape), want)
    rows = np.array(got["rows"], float).reshape(11, 20)
    assert [bool(np.isneginf(r).all()) for r in rows] == [i % 5 == 4 for i in range(11)]
    mult = dropout_multiplier(0.3, 77, 3, 2, 11, 20)
    assert np.array_equal(np.array(got["keep"]).reshape(mult.shape), mult > 0)


def test_without_webgpu_explains(
    chromium: Any, chromium_launch_args: dict[str, Any], harness_server: str
) -> None:
    args = dict(chromium_launch_args)
    args["args"] = [a for a in args["args"] if a != "--enable-unsafe-webgpu"]
    browser = chromium.browser_type.launch(**args)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{harness_server}/web/index.html", wait_until="commit")
        page.wait_for_selector("#nogpu:not([hidden])", timeout=30_000)
        text = page.inner_text("#nogpu")
        for needed in (
            "--enable-unsafe-webgpu",
            "dom.webgpu.enabled",
            "gfx.webgpu.ignore-blocklist",
        ):
            assert needed in text
        assert "requestAdapter() returned null" in text or "navigator.gpu is undefined" in text
        state = page.evaluate("document.body.dataset.state")
        assert state == "no-webgpu", page.inner_text("main")[:2000]
        assert page.is_disabled("#run")
        shot(page, "demo_no_webgpu.png")
        assert not errors, errors
    finally:
        browser.close()
