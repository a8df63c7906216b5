"""web/demo/index.html, the demo page, driven in headless Chromium.

One page for the module (Pyodide start-up and pipeline compilation happen once): it loads
and shows the adapter, a clicked run shows the errors the Python API computes for the same
inputs, the form refuses invalid values with the API's message, the smoke suite passes.
A second browser without --enable-unsafe-webgpu must get the explanation. Screenshots go
to test-results/.
"""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit
from urllib.request import urlopen

import numpy as np
import pytest

from py_harness.config import ALIBI_SLOTS, AttentionConfig, ConfigError, validate
from py_harness.host.judge.cases import SMOKE
from py_harness.host.judge.dropout import dropout_multiplier
from py_harness.host.judge.limitations import coverage
from py_harness.host.judge.verdict import OUTPUTS, judge_outputs
from py_harness.host.wire import run_on
from py_harness.kernels import variant as builtin_variant
from py_harness.variant import features_used
from tests.demo_page import (
    LOAD_TIMEOUT_MS,
    RESULTS,
    DemoSession,
    click_run,
    click_run_judged,
    shot,
    shown_errors,
    smoke_rows,
    status_counts,
    summary_counts,
    wait_js,
)

pytestmark = pytest.mark.browser


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


def test_error_map_holds_each_element_to_its_own_bound(demo: Any) -> None:
    # Element 0 errs 1 against its own bound 0.5, element 1 errs 1.8 against 2 (a long,
    # cancelling sum's): red and not red, where the worst element's 1.5 alone would say the
    # opposite of both.
    red = demo.evaluate(
        """async () => {
          const { heatmap, OVER_RGB } = await import("./demo-heatmap.js");
          const pixels = (opts) => {
            const fig = heatmap(new Float32Array([1, 1.8]), 1, 2, { kind: "error", ...opts });
            const px = fig.querySelector("canvas").getContext("2d").getImageData(0, 0, 2, 1).data;
            return [0, 1].map((i) => OVER_RGB.every((c, k) => px[4 * i + k] === c));
          };
          const own = new Float32Array([0.5, 2]);
          return [pixels({ bound: 1.5, bounds: own }), pixels({ bound: 1.5 })];
        }"""
    )
    assert red == [[True, False], [False, True]]


def test_run_agrees_with_python_api(demo: Any) -> None:
    click_run(demo)
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
    wants, _ = judge_outputs(cfg, x, reply["arrays"])
    shown = shown_errors(demo)
    assert set(shown) == set(OUTPUTS)
    for want in wants:
        name = want.name
        got = shown[name]
        assert got["passed"] == ("pass" if want.passed else "FAIL"), name
        for field in ("max_abs_err", "max_rel_err", "bound"):
            if field == "max_rel_err" and got[field] == "—":
                # Hidden only where it comes from a reference of about 0 (below the bound).
                assert want.max_rel_err * want.bound > want.max_abs_err or abs(want.expected) < max(
                    want.bound, 0
                ), (name, want)
                continue
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


def test_varlen_run_agrees_with_python_api(demo: Any) -> None:
    """A variable-length batch from the lengths field: the config the page builds (batch,
    max lengths and cu_seqlens from the text), its packed inputs, the page's verdict as the
    host judges the same outputs, and the pictures of a later sequence. Bad text is refused
    naming the field."""
    demo.select_option("select[name=variant]", "fast")
    demo.fill("input[name=seqlens]", "7:13, 0:5, 9:0, x")
    wait_js(demo, "document.querySelector('#form-error').textContent.startsWith('seqlens:')")
    assert demo.get_attribute("input[name=seqlens]", "aria-invalid") == "true"
    demo.fill("input[name=seqlens]", " 7:13, 0:5, 9:0,11:4 ")
    wait_js(demo, "!document.querySelector('#run').disabled")
    try:
        click_run(demo)
        run = demo.evaluate(
            "(({config, variant, inputs}) => ({config, variant, inputs}))(window.demo.lastRun)"
        )
        cfg = AttentionConfig.from_dict(run["config"])
        assert (cfg.batch, cfg.seq_q, cfg.seq_k) == (4, 11, 13)
        assert cfg.cu_seqlens_q == (0, 7, 7, 16, 27) and cfg.cu_seqlens_k == (0, 13, 18, 18, 22)
        shapes = cfg.shapes()
        x = {
            n: np.frombuffer(base64.b64decode(b), "<f4").reshape(shapes[n])
            for n, b in run["inputs"].items()
        }
        assert x["q"].shape == (27, cfg.num_heads, cfg.head_dim)
        reply = run_on(DemoSession(demo), cfg, x, variant="fast")
        wants, _ = judge_outputs(cfg, x, reply["arrays"])
        shown = shown_errors(demo)
        for want in wants:
            assert shown[want.name]["passed"] == ("pass" if want.passed else "FAIL"), want.name
        assert all(w.passed for w in wants) and demo.inner_text("#verdict") == "PASS"
        demo.select_option("#pick-b", "3")  # the sequence of 11 queries and 4 keys
        wait_js(demo, "document.querySelector('#weights canvas') !== null")
        assert "batch 3" in demo.inner_text("#weights")
        shot(demo, "demo_varlen_run.png")
    finally:
        demo.fill("input[name=seqlens]", "")
        wait_js(demo, "document.querySelector('#form-error').textContent === ''")


def test_invalid_value_shows_python_message(demo: Any) -> None:
    def message_for(**change: Any) -> str:
        base = dict(batch=1, num_heads=4, num_kv_heads=2, seq_q=113, seq_k=203, head_dim=59)
        with pytest.raises(ConfigError) as err:
            validate(AttentionConfig(**(base | change), causal=True))
        return str(err.value)

    for field, value in (("num_kv_heads", 3), ("head_dim", 257)):
        demo.fill(f"input[name={field}]", str(value))
        want = message_for(**{field: value})
        wait_js(demo, "document.querySelector('#form-error').textContent === arg", want)
        assert demo.get_attribute(f"input[name={field}]", "aria-invalid") == "true"
        assert demo.is_disabled("#run")
        assert f"{field}={value}" in demo.evaluate("location.search")
    demo.fill("input[name=num_kv_heads]", "2")
    demo.fill("input[name=head_dim]", "59")
    wait_js(demo, "document.querySelector('#form-error').textContent === ''")
    wait_js(demo, "!document.querySelector('#run').disabled")


def test_form_refuses_what_the_server_would(demo: Any) -> None:
    """Sq = Sk = 30000 with head_dim 1 is a valid config whose float64 reference needs tens
    of GB: the form refuses it with the words the server would use (its /api/info
    reference_limits passed to validate_config)."""
    from py_harness import reference_cost

    limits = demo.evaluate("window.demo.info.reference_limits")
    assert limits, "the server's /api/info has no reference_limits"
    check = reference_cost.check_reference_cost
    base = dict(batch=1, num_heads=4, num_kv_heads=2, seq_q=30000, seq_k=30000, head_dim=1)
    with pytest.raises(ConfigError) as err:
        check(AttentionConfig(**base, causal=True), limits)
    want = str(err.value)
    for field in ("seq_q", "seq_k", "head_dim"):
        demo.fill(f"input[name={field}]", str(base[field]))
    wait_js(demo, "document.querySelector('#form-error').textContent === arg", want)
    assert demo.is_disabled("#run") and demo.is_disabled("#compare")
    assert demo.get_attribute("input[name=seq_k]", "aria-invalid") == "true"
    shot(demo, "demo_reference_limit.png", "#case-card")
    for field, value in (("seq_q", 113), ("seq_k", 203), ("head_dim", 59)):
        demo.fill(f"input[name={field}]", str(value))
    wait_js(demo, "document.querySelector('#form-error').textContent === ''")


def test_form_refuses_window_with_window_left(demo: Any) -> None:
    """window (symmetric) and window_left together: Python's validate refuses the pair, and
    the form shows its message, marking both fields, before any run."""
    base = dict(batch=1, num_heads=4, num_kv_heads=2, seq_q=113, seq_k=203, head_dim=59)
    with pytest.raises(ConfigError) as err:
        validate(AttentionConfig(**base, causal=True, window=3, window_left=2))
    want = str(err.value)
    assert want.startswith("window:") and "window_left" in want, want
    try:
        demo.fill("input[name=window]", "3")
        demo.fill("input[name=window_left]", "2")
        wait_js(demo, "document.querySelector('#form-error').textContent === arg", want)
        for field in ("window", "window_left"):
            assert demo.get_attribute(f"input[name={field}]", "aria-invalid") == "true", field
        assert demo.get_attribute("input[name=window_right]", "aria-invalid") is None
        assert demo.is_disabled("#run") and demo.is_disabled("#compare")
        assert "window_left=2" in demo.evaluate("location.search")
        shot(demo, "demo_window_and_window_left.png", "#case-card")
    finally:
        demo.fill("input[name=window]", "0")
        demo.fill("input[name=window_left]", "-1")
    wait_js(demo, "document.querySelector('#form-error').textContent === ''")


def test_form_refuses_more_alibi_slopes_than_the_kernels_read(demo: Any) -> None:
    """One slope per batch element and head with B x H = 16512, over config.ALIBI_SLOTS: the
    form shows validate's message under its argument, alibi_slopes (marking the ALiBi select,
    batch and heads), before any run; one slope per head is fine."""
    big = dict(batch=128, num_heads=129, num_kv_heads=1, seq_q=3, seq_k=3, head_dim=2)
    assert big["batch"] * big["num_heads"] > ALIBI_SLOTS
    before = {name: demo.input_value(f"input[name={name}]") for name in big}
    variant_before = demo.input_value("select[name=variant]")
    try:
        demo.select_option("select[name=variant]", "fast")
        demo.select_option("select[name=alibi]", "batch")
        for name, value in big.items():
            demo.fill(f"input[name={name}]", str(value))
        cfg = AttentionConfig.from_dict(demo.evaluate("window.demo.readForm().config"))
        assert cfg.alibi_shape == (128, 129)
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        assert err.value.argument == "alibi_slopes"
        wait_js(demo, "document.querySelector('#form-error').textContent === arg", str(err.value))
        for field in ("select[name=alibi]", "input[name=batch]", "input[name=num_heads]"):
            assert demo.get_attribute(field, "aria-invalid") == "true", field
        assert demo.is_disabled("#run") and demo.is_disabled("#compare")
        shot(demo, "demo_alibi_too_many_slopes.png", "#case-card")
        demo.select_option("select[name=alibi]", "head")
        wait_js(
            demo,
            "document.querySelector('#form-error').textContent === '' && "
            "!document.querySelector('#run').disabled",
        )
    finally:
        for name, value in before.items():
            demo.fill(f"input[name={name}]", value)
        demo.select_option("select[name=alibi]", "none")
        demo.select_option("select[name=variant]", variant_before)
    wait_js(demo, "document.querySelector('#form-error').textContent === ''")


def _set_field(page: Any, selector: str, value: str) -> None:
    """Fill a form field, or pick a select's option."""
    if selector.startswith("select"):
        page.select_option(selector, value)
    else:
        page.fill(selector, value)


# A feature the seed does not support: its form field, a value that uses it, and off.
SEED_REFUSES = {
    "softcap": ("input[name=softcap]", "2.5", "0"),
    "alibi": ("select[name=alibi]", "head", "none"),
    "varlen": ("input[name=seqlens]", "7:13, 0:5, 9:0", ""),
}


@pytest.mark.parametrize("feature", list(SEED_REFUSES))
def test_form_refuses_what_the_variant_does_not_support(demo: Any, feature: str) -> None:
    """softcap or ALiBi with the seed variant, which does not support them: the form shows
    the seed's refusal (Variant.refusal, asked of the page's Python) and marks the field and
    the variant; a forced submit runs nothing. The fast variant takes the same form; a
    comparison with the seed on one side is refused with the same words, before any run."""
    field, value, off = SEED_REFUSES[feature]
    judged: list[str] = []
    on_request = lambda r: "/api/judge" in r.url and judged.append(r.url)  # noqa: E731
    before = demo.evaluate("window.demo.history.length")
    variant_before = demo.input_value("select[name=variant]")
    demo.on("request", on_request)
    try:
        demo.select_option("select[name=variant]", "seed")
        _set_field(demo, field, value)
        cfg = AttentionConfig.from_dict(demo.evaluate("window.demo.readForm().config"))
        assert feature in features_used(cfg)
        refusal = builtin_variant("seed").refusal(cfg)
        assert refusal and feature in refusal, refusal
        want = f"variant: {refusal}"
        wait_js(demo, "document.querySelector('#form-error').textContent === arg", want)
        for marked in (field, "select[name=variant]"):
            assert demo.get_attribute(marked, "aria-invalid") == "true", marked
        assert demo.is_disabled("#run") and demo.is_disabled("#compare")
        shot(demo, f"demo_{feature}_seed_refused.png", "#case-card")
        # A submit anyway (Enter in a field) validates again and starts nothing.
        demo.evaluate("document.body.dataset.run = ''")
        demo.evaluate("document.querySelector('#form-error').textContent = 'pending'")
        demo.evaluate("document.querySelector('#case-form').requestSubmit()")
        wait_js(demo, "document.querySelector('#form-error').textContent === arg", want)
        assert demo.evaluate("document.body.dataset.run") == ""
        assert demo.is_hidden("#job")

        demo.select_option("select[name=variant]", "fast")
        assert builtin_variant("fast").refusal(cfg) is None
        wait_js(
            demo,
            "document.querySelector('#form-error').textContent === '' && "
            "!document.querySelector('#run').disabled",
        )
        assert demo.get_attribute(field, "aria-invalid") is None
        demo.select_option("#compare-a", "seed")
        demo.select_option("#compare-b", "fast")
        demo.evaluate("document.querySelector('#run-status').textContent = ''")
        demo.click("#compare")
        wait_js(demo, "document.querySelector('#run-status').textContent !== ''")
        assert demo.inner_text("#run-status") == f"compare: A (seed): {refusal}"
        assert demo.evaluate("document.body.dataset.run") == ""
    finally:
        demo.remove_listener("request", on_request)
        _set_field(demo, field, off)
        demo.select_option("select[name=variant]", variant_before)
    wait_js(demo, "document.querySelector('#form-error').textContent === ''")
    assert not judged and demo.evaluate("window.demo.history.length") == before


VERDICT_TEXT = {
    "pass": "pass",
    "fail": "FAIL",
    "known": "known failure",
    "unsupported": "unsupported on this driver",
    "skipped": "not supported by the variant",
}


def _server_cases(base_url: str, variant: str, adapter: str) -> dict[str, dict[str, Any]]:
    """The server's smoke cases, each with the declared limitation covering it (or None)."""
    query = urlencode({"variant": variant, "adapter": adapter})
    with urlopen(f"{base_url}/api/cases?{query}", timeout=30) as resp:
        return {c["id"]: c for c in json.loads(resp.read())["cases"]}


def _run_smoke(page: Any) -> None:
    page.evaluate("document.body.dataset.smoke = ''")
    page.click("#smoke")
    wait_js(page, "document.body.dataset.smoke === 'done'", timeout=LOAD_TIMEOUT_MS)


def _copied_smoke(page: Any) -> dict[str, Any]:
    page.evaluate("document.querySelector('#copy-status').textContent = ''")
    page.click("#copy-json")
    wait_js(page, "document.querySelector('#copy-status').textContent !== ''")
    return json.loads(page.evaluate("navigator.clipboard.readText()"))


def test_smoke_suite_passes(demo: Any, harness_server: str) -> None:
    # The seed variant, whose declared flaw (seed-k-scaling) may cover some cases.
    demo.select_option("select[name=variant]", "seed")
    adapter = demo.evaluate("window.demo.adapterName")
    server = _server_cases(harness_server, "seed", adapter)
    t0 = time.perf_counter()
    _run_smoke(demo)
    rows = smoke_rows(demo)
    assert [r["case"] for r in rows] == [c.id for c in SMOKE]
    (RESULTS / "demo_smoke_seconds.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
    shot(demo, "demo_smoke.png", "#smoke-card")

    copied = _copied_smoke(demo)
    assert copied["variant"] == "seed" and copied["adapter"] == adapter
    assert [r["case"] for r in copied["results"]] == [c.id for c in SMOKE]
    table = demo.inner_text("#smoke-table")
    # Every row passes, except where a declared limitation covers the case: a driver's is
    # not run, a failure the variant's flaw covers is known (strict, as in pytest); and a
    # case the variant does not support (its refusal, as Python words it) is not run.
    # The page sends each case's config as JS numbers, so softcap 10.0 arrives as 10.
    js = lambda v: int(v) if isinstance(v, float) and v.is_integer() else v  # noqa: E731
    refusals = {
        c.id: builtin_variant("seed").refusal(
            AttentionConfig.from_dict({k: js(v) for k, v in c.config().to_dict().items()})
        )
        for c in SMOKE
    }
    assert any(refusals.values()), "no smoke case is one the seed refuses"
    for r, row in zip(copied["results"], rows, strict=True):
        covered = server[r["case"]]["covered"]
        where = f"{r['case']}\n{table}"
        assert r["covered"] == covered, where
        if refusals[r["case"]]:
            assert r["status"] == "skipped" and "reports" not in r, where
            assert r["refusal"] == refusals[r["case"]], where
            assert row["passed"] is None and refusals[r["case"]] in row["text"], where
        elif covered and covered["status"] == "unsupported":
            assert r["status"] == "unsupported" and "reports" not in r, where
            assert row["passed"] is None and covered["reason"] in row["text"], where
        else:
            want = "pass" if r["passed"] else "known" if covered else "fail"
            assert r["status"] == want != "fail", where
            assert row["passed"] == ("true" if r["passed"] else "false")
            assert len(r["reports"]) == len(OUTPUTS)
        assert row["status"] == r["status"], where
        assert row["verdict"].startswith(VERDICT_TEXT[r["status"]]), where
        if r["status"] in ("known", "unsupported"):
            assert row["title"] == covered["text"], where
    assert copied["passed"] is True
    summary = demo.inner_text("#smoke-summary")
    assert summary.startswith(summary_counts(copied["results"], "seed") + " · "), summary


def test_smoke_shows_what_limitations_cover(demo: Any, harness_server: str) -> None:
    """Whatever the server declares is what the rows say: a case a driver limitation covers
    is not run and not counted as a failure, a known failure names its flaw. No smoke case
    is covered on every driver, so the server's answers are edited on their way: three
    small cases, one declared unsupported and one declared a known failure."""
    ids = ["d1-sq17-sk17-h4", "d18-sq113-sk59-h2-causal", "d32-sq59-sk203-mqa3x1"]
    unsupported = {
        "status": "unsupported",
        "limitation": "test-driver-loops",
        "reason": "a loop of 203 keys: this driver stops long loops (a test's declaration)",
        "cause": "declared by tests/test_demo_page.py",
        "text": "unsupported on this driver (test-driver-loops): a loop of 203 keys: this "
        "driver stops long loops (a test's declaration)",
    }
    known = {
        "status": "known",
        "limitation": "test-flaw",
        "reason": "a test's declaration",
        "cause": "declared by tests/test_demo_page.py",
        "text": "known flaw (test-flaw): a test's declaration",
    }
    asked: list[str] = []

    def cases(route: Any) -> None:
        asked.append(route.request.url)
        got = route.fetch().json()
        chosen = {c["id"]: c for c in got["cases"] if c["id"] in ids}
        chosen[ids[2]]["covered"] = unsupported
        chosen[ids[1]]["covered"] = known
        route.fulfill(json={**got, "cases": [chosen[i] for i in ids]})

    def judge_case(route: Any) -> None:
        got = route.fetch().json()
        if got["case"] == ids[1]:
            got |= {"passed": False, "status": "known", "covered": known}
        route.fulfill(json=got)

    inputs_for: list[str] = []
    on_request = lambda r: "/api/inputs" in r.url and inputs_for.append(r.url)  # noqa: E731
    cases_url = re.compile(r"/api/cases\?")
    demo.route(cases_url, cases)
    demo.route("**/api/judge_case", judge_case)
    demo.on("request", on_request)
    try:
        _run_smoke(demo)
        rows = {r["case"]: r for r in smoke_rows(demo)}
        copied = _copied_smoke(demo)
        shot(demo, "demo_smoke_covered.png", "#smoke-card")
    finally:
        demo.remove_listener("request", on_request)
        demo.unroute(cases_url)
        demo.unroute("**/api/judge_case")
    adapter = demo.evaluate("window.demo.adapterName")
    assert len(asked) == 1 and parse_qs(urlsplit(asked[0]).query) == {
        "variant": ["seed"],
        "adapter": [adapter],
    }
    assert list(rows) == ids
    # The unsupported case is not run at all.
    assert not any(ids[2] in u for u in inputs_for) and len(inputs_for) == 2
    row = rows[ids[2]]
    assert row["status"] == "unsupported" and row["passed"] is None
    assert row["verdict"] == "unsupported on this driver" and row["title"] == unsupported["text"]
    assert unsupported["reason"] in row["text"] and "test-driver-loops" in row["text"]
    row = rows[ids[1]]
    assert row["status"] == "known" and row["verdict"].startswith("known failure")
    assert "test-flaw" in row["verdict"]  # the flaw's name under the verdict
    assert row["title"] == known["text"]
    assert rows[ids[0]]["status"] == "pass" and rows[ids[0]]["verdict"] == "pass"
    by_case = {r["case"]: r for r in copied["results"]}
    assert by_case[ids[2]]["status"] == "unsupported" and by_case[ids[2]]["covered"] == unsupported
    assert by_case[ids[1]]["status"] == "known" and by_case[ids[1]]["covered"] == known
    assert by_case[ids[0]]["status"] == "pass" and by_case[ids[0]]["covered"] is None
    assert copied["passed"] is True  # a known failure and an unsupported case are no failures
    assert copied["counts"] == {
        "passed": 1,
        "known": 1,
        "unsupported": 1,
        "skipped": 0,
        "failed": 0,
        "errors": 0,
        "not_run": 0,
    }
    assert status_counts(demo) == {"pass": 1, "fail": 0, "known": 1, "unsupported": 1}
    summary = demo.inner_text("#smoke-summary")
    assert summary.startswith(
        "1 passed, 1 known failure, 1 unsupported on this driver, 0 failed · "
    ), summary
    assert "fail" not in (demo.get_attribute("#smoke-summary", "class") or "")


def test_matrix_skips_alibi_on_the_seed_and_passes_it_on_fast(demo: Any) -> None:
    """The matrix's ALiBi case (one slope per head): the seed does not support it, so the
    view shows it skipped with the seed's reason, never failed; the fast variant runs it on
    the server's inputs (slopes included) and passes. The case's details name the setting."""
    case = next(c for c in SMOKE if c.alibi == "head")
    refusal = builtin_variant("seed").refusal(case.config())
    assert refusal == f"seed does not support alibi (alibi_shape=[{case.num_heads}])"
    demo.evaluate(
        "id => { history.pushState(null, '', '?variant=seed&case=' + id); "
        "dispatchEvent(new PopStateEvent('popstate')); }",
        case.id,
    )
    wait_js(demo, "document.querySelector('#case-detail').dataset.case === arg", case.id)
    assert "ALiBi per head" in demo.inner_text("#case-detail [data-field=config]")
    shown = {}
    for variant in ("seed", "fast"):
        demo.select_option("select[name=variant]", variant)
        demo.evaluate("document.body.dataset.smoke = ''")
        demo.click("#case-run")
        wait_js(demo, "document.body.dataset.smoke === 'done'", timeout=LOAD_TIMEOUT_MS)
        (row,) = smoke_rows(demo)
        assert row["case"] == case.id, row
        summary = demo.inner_text("#smoke-summary")
        assert summary.startswith(summary_counts([row], variant) + " · "), summary
        shown[variant] = row, demo.inner_text("#case-detail [data-field=status]")
        shot(demo, f"demo_alibi_matrix_{variant}.png", "#smoke-card")
    row, status = shown["seed"]
    assert row["status"] == "skipped" and row["passed"] is None, row
    assert row["verdict"] == VERDICT_TEXT["skipped"] and row["title"] == refusal, row
    assert refusal in row["text"] and refusal in status, (row, status)
    row, status = shown["fast"]
    assert row["status"] == "pass" and row["passed"] == "true", (row, status)


# d109-sq7-sk1-h3-win1 (cases.py): each row's one visible key is seen by no other row, what
# the seed's declared flaw (seed-k-scaling) covers.
FLAW_FORM = {
    "batch": 1,
    "num_heads": 3,
    "num_kv_heads": 3,
    "seq_q": 7,
    "seq_k": 1,
    "head_dim": 109,
    "causal_offset": 0,
    "window": 1,
    "dropout_p": 0,
    "seed": 0,
    "input_seed": 1,
}


def _run_form(page: Any, fields: dict[str, Any], variant: str) -> tuple[dict, dict]:
    """Fill the form (not causal, no mask), click Run: (window.demo.lastRun's verdict
    fields, the body the page posted to /api/judge)."""
    for name, value in fields.items():
        page.fill(f"input[name={name}]", str(value))
    page.uncheck("input[name=causal]")
    page.select_option("select[name=mask]", "none")
    page.select_option("select[name=variant]", variant)
    wait_js(
        page,
        "document.querySelector('#form-error').textContent === '' && "
        "!document.querySelector('#run').disabled",
    )
    sent = click_run_judged(page)
    run = page.evaluate(
        "(({config, variant, passed, status, covered, reports}) => "
        "({config, variant, passed, status, covered, reports}))(window.demo.lastRun)"
    )
    cfg = run["config"]
    assert {k: cfg[k] for k in fields if k != "input_seed"} == {
        k: v for k, v in fields.items() if k != "input_seed"
    }
    assert run["variant"] == variant and not cfg["causal"]
    return run, sent


def test_case_a_declared_flaw_covers(demo: Any) -> None:
    """The form's run of a case the seed's declared flaw covers shows PASS or a known
    failure naming that flaw, never a plain FAIL."""
    adapter = demo.evaluate("window.demo.adapterName")
    run, sent = _run_form(demo, FLAW_FORM, "seed")
    assert (sent["variant"], sent["adapter"]) == ("seed", adapter)
    cfg = AttentionConfig.from_dict(run["config"])
    want = coverage("seed", adapter, cfg)  # the server's rule, asked here
    assert want is not None and want.limitation.name == "seed-k-scaling"
    covered = run["covered"]
    assert covered["limitation"] == "seed-k-scaling" and covered["status"] == "known", covered
    assert covered["reason"] == want.reason
    assert run["status"] == ("pass" if run["passed"] else "known")
    verdict = demo.inner_text("#verdict")
    note = demo.inner_text("#verdict-note")
    shot(demo, "demo_known.png", "#result-card")
    assert verdict in ("PASS", "known failure"), verdict
    assert verdict == ("PASS" if run["passed"] else "known failure")
    assert demo.is_visible("#verdict-note") and "seed-k-scaling" in note, note
    assert covered["reason"] in note
    assert demo.is_hidden("#errors-caveat")  # a kernel flaw's errors are still a verdict
    # Each error row's tooltip names the float32 baseline that set its bound, or the worst
    # element's own sum of |terms| where that set it, and the baseline beside it.
    titles = demo.eval_on_selector_all(
        "#errors tr[data-output]",
        "rs => Object.fromEntries(rs.map(r => [r.dataset.output, r.title]))",
    )
    for r in run["reports"]:
        assert r["baseline"] in ("blas32", "seq32"), r
        if r["worst_index"]:
            title = titles[r["name"]]
            assert f"{r['baseline']}) + " in title, title
            assert ("u·Σ|terms|" in title) == (r["term_err"] > r["baseline_err"]), (title, r)


def test_case_unsupported_on_this_driver_is_no_verdict(demo: Any) -> None:
    """A run that a driver limitation covers is shown as unsupported, with the reason and
    the cause, and its error table is marked as no verdict. No driver limitation covers
    this machine's adapter, so the server's answer is edited on its way."""
    covered = {
        "status": "unsupported",
        "limitation": "test-driver-loops",
        "reason": "a loop of 109 dims: this driver stops long loops (a test's declaration)",
        "cause": "declared by tests/test_demo_page.py: the driver stops the loop",
        "text": "unsupported on this driver (test-driver-loops): a loop of 109 dims: this "
        "driver stops long loops (a test's declaration)",
    }

    def judge(route: Any) -> None:
        got = route.fetch().json()
        route.fulfill(json=got | {"status": "unsupported", "covered": covered})

    demo.route("**/api/judge", judge)
    try:
        run, _ = _run_form(demo, FLAW_FORM, "fast")
    finally:
        demo.unroute("**/api/judge")
    assert run["status"] == "unsupported"
    assert demo.inner_text("#verdict") == "unsupported on this driver"
    note = demo.inner_text("#verdict-note")
    assert "Not a verdict" in note and covered["reason"] in note and covered["cause"] in note
    assert demo.is_visible("#errors-caveat")
    assert "not-verdict" in (demo.get_attribute("#errors", "class") or "")
    shot(demo, "demo_unsupported.png", "#result-card")


def test_url_restores_the_form(demo: Any, harness_server: str) -> None:
    page = demo.context.new_page()
    # Restoring the form needs no Python: keep Pyodide from booting (seconds of busy main
    # thread) in a page that is closed right away.
    page.route("**/pyodide/**", lambda route: route.abort())
    try:
        query = (
            "batch=2&num_heads=6&num_kv_heads=3&causal=0&window=17&mask=keypad&alibi=batch"
            "&input_seed=9"
        )
        # No need to wait for Pyodide: restoring the form is the first thing demo.js does.
        page.goto(f"{harness_server}/demo/index.html?{query}", wait_until="commit")
        page.wait_for_selector("#stages li")
        values = page.evaluate(
            "Object.fromEntries([...document.querySelector('#case-form').elements]"
            ".filter(e => e.name).map(e => [e.name, e.type === 'checkbox' ? e.checked : e.value]))"
        )
        assert values | {"batch": "2", "num_heads": "6", "num_kv_heads": "3"} == values
        assert (values["causal"], values["window"], values["mask"]) == (False, "17", "keypad")
        assert values["alibi"] == "batch"
        assert values["input_seed"] == "9" and values["seq_q"] == "113"
    finally:
        page.close()


def test_inputs_are_seeded_and_masks_mean_what_the_harness_means(demo: Any) -> None:
    got = demo.evaluate(
        """async () => {
            const d = await import('/demo/demo-data.js');
            const cfg = {batch: 3, num_heads: 2, num_kv_heads: 1, seq_q: 11, seq_k: 20,
                         head_dim: 5, causal: false, causal_offset: 0, window: 0,
                         dropout_p: 0.3, seed: 77};
            const sum = (a) => Array.from(a).join(',');
            const a = d.makeInputs(cfg, 'keypad', 5), b = d.makeInputs(cfg, 'keypad', 5);
            const c = d.makeInputs(cfg, 'keypad', 6);
            const rows = d.makeInputs(cfg, 'rows', 5).mask;
            // ALiBi slopes come last: the other tensors are those drawn without them.
            const al = d.makeInputs({...cfg, alibi_shape: [3, 2]}, 'keypad', 5);
            const perHead = d.makeInputs({...cfg, alibi_shape: [2]}, 'keypad', 5);
            const keep = [];
            for (let b = 0; b < 3; b++) for (let h = 0; h < 2; h++) {
                const k = d.dropoutKeep(0.3, 77, 2, b, h);
                for (let i = 0; i < 11; i++) for (let j = 0; j < 20; j++) keep.push(k(i, j));
            }
            const alibiLast = ['q', 'k', 'v', 'd_out', 'mask'].every(
                (n) => sum(al[n]) === sum(a[n]));
            return {same: sum(a.q) === sum(b.q) && sum(a.mask) === sum(b.mask), alibiLast,
                    slopes: Array.from(al.alibi_slopes), perHead: Array.from(perHead.alibi_slopes),
                    noSlopes: !('alibi_slopes' in a),
                    differs: sum(a.q) !== sum(c.q), keypad: Array.from(a.mask, String),
                    rows: Array.from(rows, String), keep};
        }"""
    )
    assert got["same"] and got["differs"]
    # FlashAttention-2's test draw of the slopes: uniform in [0, 0.3), float32, [B, H] or [H].
    assert got["alibiLast"] and got["noSlopes"]
    slopes = np.array(got["slopes"])
    assert slopes.shape == (6,) and np.array_equal(slopes, slopes.astype(np.float32))
    assert (slopes >= 0).all() and (slopes <= np.float32(0.3)).all() and len(set(slopes)) == 6
    assert got["perHead"] == got["slopes"][:2]  # the same stream, two slopes instead of six
    # inputs.make_mask's keypad: batch b sees its first sk - 7b - 3 keys.
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
        page.goto(f"{harness_server}/demo/index.html", wait_until="commit")
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
