"""The demo page as a tool for comparing kernels, driven in headless Chromium: a run history
that names each result, variant A against B on the same inputs in one click, progress with
cancel, downloads and the command line that reproduces a run, relative error shown only
where it means something, and the whole-matrix view counted by status. One page for the
module; screenshots go to test-results/.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from py_harness.config import AttentionConfig
from py_harness.host.judge.reference import alibi_bias, visible_mask
from py_harness.host.judge.verdict import OUTPUTS
from py_harness.host.wire import run_on
from tests.demo_page import (
    LOAD_TIMEOUT_MS,
    DemoSession,
    click_run,
    click_run_judged,
    shot,
    shown_errors,
    smoke_rows,
    status_counts,
    wait_js,
)

pytestmark = pytest.mark.browser


# A case small enough to run in a second on SwiftShader.
TINY = {
    "batch": 1,
    "num_heads": 2,
    "num_kv_heads": 1,
    "seq_q": 9,
    "seq_k": 13,
    "head_dim": 8,
    "causal_offset": 0,
    "window": 0,
    "window_left": -1,
    "window_right": -1,
    "softcap": 0,
    "dropout_p": 0,
    "seed": 0,
    "input_seed": 3,
    "repeats": 1,
}


def _fill(page: Any, fields: dict[str, Any], variant: str, alibi: str = "none") -> None:
    """Fill the form (not causal, no mask, ALiBi as `alibi` says) and wait until it is
    valid."""
    for name, value in fields.items():
        page.fill(f"input[name={name}]", str(value))
    page.uncheck("input[name=causal]")
    page.select_option("select[name=mask]", "none")
    page.select_option("select[name=alibi]", alibi)
    page.select_option("select[name=variant]", variant)
    wait_js(
        page,
        "document.querySelector('#form-error').textContent === '' && "
        "!document.querySelector('#run').disabled",
    )


def _history(page: Any) -> list[dict[str, Any]]:
    return page.eval_on_selector_all(
        "#history li",
        """lis => lis.map(li => ({id: Number(li.dataset.id), kind: li.dataset.kind,
            name: li.querySelector('.h-name').textContent,
            meta: li.querySelector('.h-meta').textContent,
            selected: li.classList.contains('selected')}))""",
    )


def test_history_keeps_runs_with_their_names(demo: Any) -> None:
    before = len(_history(demo))
    _fill(demo, TINY, "seed")
    click_run(demo)
    _fill(demo, TINY | {"head_dim": 16}, "fast")
    click_run(demo)
    entries = _history(demo)
    assert len(entries) == before + 2, entries
    newest, older = entries[0], entries[1]
    assert "fast · B1 H2 Hkv1 Sq9 Sk13 D16" in newest["name"], newest
    assert "seed · B1 H2 Hkv1 Sq9 Sk13 D8" in older["name"], older
    adapter = demo.evaluate("window.demo.adapterName")
    for e in (newest, older):
        assert adapter in e["meta"] and "Chromium" in e["meta"], e
        assert re.search(r"\d\d:\d\d:\d\d", e["meta"]), e
    assert newest["selected"] and not older["selected"]
    assert newest["name"] in demo.inner_text("#result-title")
    # Pick the older one: the result card and the pictures show it.
    demo.click(f"#history li[data-id='{older['id']}'] button[data-act=show]")
    assert older["name"] in demo.inner_text("#result-title")
    assert demo.evaluate("window.demo.selected") == older["id"]
    assert demo.locator("#maps canvas").count() == 8
    shot(demo, "demo_history.png", "#history-card")
    # Remove the newest: the other stays, still shown.
    demo.click(f"#history li[data-id='{newest['id']}'] button[data-act=remove]")
    after = _history(demo)
    assert [e["id"] for e in after] == [e["id"] for e in entries[1:]]
    assert older["name"] in demo.inner_text("#result-title")


def _page_inputs(page: Any, path: str) -> dict[str, np.ndarray]:
    flat = page.evaluate(
        f"Object.fromEntries(Object.entries({path}).map(([n, a]) => [n, Array.from(a)]))"
    )
    return {n: np.array(v, np.float32) for n, v in flat.items()}


def _compare(page: Any, a: str, b: str) -> dict[str, Any]:
    page.select_option("#compare-a", a)
    page.select_option("#compare-b", b)
    page.evaluate("document.body.dataset.run = ''")
    page.click("#compare")  # one click: both variants, both judged, the difference
    wait_js(page, "['done', 'error'].includes(document.body.dataset.run)", timeout=LOAD_TIMEOUT_MS)
    assert page.evaluate("document.body.dataset.run") == "done", page.inner_text("#run-status")
    return page.evaluate(
        "(({a, b, maxDiff, config}) => ({a: {variant: a.variant, reports: a.reports, "
        "timings_ms: a.timings_ms}, b: {variant: b.variant, reports: b.reports, "
        "timings_ms: b.timings_ms}, maxDiff, config}))(window.demo.lastCompare)"
    )


def _shown_compare(page: Any) -> dict[str, Any]:
    return page.evaluate(
        """() => {
            const all = (sel) => [...document.querySelectorAll('#compare-table ' + sel)];
            return {
                heads: all('th[data-side]').map(th => th.textContent),
                ratios: Object.fromEntries(all('td[data-ratio]')
                    .map(td => [td.dataset.side + ':' + td.dataset.ratio, td.textContent])),
                diffs: Object.fromEntries(all('td[data-diff]')
                    .map(td => [td.dataset.diff, td.textContent])),
                times: all('tr[data-row=forward_ms] td[data-side]').map(td => td.textContent),
                maps: document.querySelectorAll('#maps[data-kind=compare] canvas').length,
            };
        }"""
    )


def test_compare_a_vs_b_in_one_click(demo: Any) -> None:
    _fill(demo, TINY | {"head_dim": 33, "seq_k": 70}, "seed")
    got = _compare(demo, "seed", "seed")
    shown = _shown_compare(demo)
    assert shown["heads"] == ["A: seed", "B: seed"]
    assert set(shown["diffs"]) == set(OUTPUTS) and all(v == "0" for v in shown["diffs"].values())
    assert all(v == 0 for v in got["maxDiff"].values()), got["maxDiff"]
    assert shown["maps"] == 4  # |A - B| of O, dQ, dK, dV
    # On these inputs the two variants' outputs do differ: asked through the page's harness
    # directly (run_case per variant), not through the comparison.
    x = _page_inputs(demo, "window.demo.lastCompare.arrays.x")
    cfg = AttentionConfig.from_dict(got["config"])
    shapes = cfg.shapes()
    x = {n: a.reshape(shapes[n]) for n, a in x.items()}
    session = DemoSession(demo)
    out = {v: run_on(session, cfg, x, variant=v)["arrays"] for v in ("seed", "fast")}
    want = {n: float(np.abs(out["seed"][n] - out["fast"][n]).max()) for n in OUTPUTS}
    assert any(d > 0 for d in want.values()), "seed and fast agree bit for bit on this case"

    got = _compare(demo, "seed", "fast")
    shown = _shown_compare(demo)
    shot(demo, "demo_compare.png", "#compare-card")
    assert shown["heads"] == ["A: seed", "B: fast"]
    assert len(shown["times"]) == 2 and all(t.endswith(" ms") for t in shown["times"])
    for side, r in (("a", got["a"]), ("b", got["b"])):
        for rep in r["reports"]:
            assert float(shown["ratios"][f"{side}:{rep['name']}"]) == pytest.approx(
                float(rep["ratio"]), abs=6e-4
            )
    for n in OUTPUTS:
        assert got["maxDiff"][n] == pytest.approx(want[n], rel=1e-6, abs=1e-12), n
        if want[n] > 0:
            assert float(shown["diffs"][n]) == pytest.approx(want[n], rel=6e-3), n
    entries = _history(demo)
    assert entries[0]["kind"] == "compare" and "seed vs fast" in entries[0]["name"]


# FlashAttention-2's axes beyond the seed's, all at once: Sq > Sk with the queries aligned
# bottom-right (causal_offset = Sk - Sq = -4), a (left, right) window of (3, 2) (the first
# two rows see no key) and a softcap.
FA2_AXES = TINY | {
    "seq_q": 13,
    "seq_k": 9,
    "causal_offset": -4,
    "window_left": 3,
    "window_right": 2,
    "softcap": 2.5,
}


def test_fast_runs_softcap_window_lr_bottom_right(demo: Any) -> None:
    """The fast variant runs the case and passes; its name, result title and pictures say
    bottom-right, window (3, 2) and softcap 2.5; the page's attention weights are the
    reference's (softcapped scores, the general visibility rule); the command line's link
    carries the new fields."""
    _fill(demo, FA2_AXES, "fast")
    click_run(demo)
    run = demo.evaluate(
        "(({config, variant, passed, status, name}) => "
        "({config, variant, passed, status, name}))(window.demo.lastRun)"
    )
    cfg = AttentionConfig.from_dict(run["config"])
    assert (cfg.causal_offset, cfg.window_left, cfg.window_right, cfg.softcap) == (-4, 3, 2, 2.5)
    assert (cfg.seq_q, cfg.seq_k, cfg.window, cfg.causal) == (13, 9, 0, False)
    assert run["variant"] == "fast" and run["passed"] and run["status"] == "pass", run
    assert demo.inner_text("#verdict") == "PASS"
    described = ("bottom-right (offset -4)", "window (3, 2)", "softcap 2.5")
    title = demo.inner_text("#result-title")
    weights = demo.inner_text("#weights")
    for part in described:
        assert part in run["name"], (part, run["name"])
        assert part in title, (part, title)
        assert part in weights, (part, weights)
    assert _history(demo)[0]["name"] == run["name"]
    shot(demo, "demo_fa2_axes.png", "#result-card")
    shot(demo, "demo_fa2_axes_weights.png", "#weights")

    # The picture's weights against the reference's rule on the same inputs.
    x = _page_inputs(demo, "window.demo.lastRun.arrays.x")
    vis = visible_mask(cfg.seq_q, cfg.seq_k, causal_offset=-4, window_left=3, window_right=2)
    assert not vis[:2].any() and vis[2:].any(axis=1).all()
    cap = float(np.float32(cfg.softcap))
    _assert_page_weights(demo, cfg, x, vis, lambda s, b, h: cap * np.tanh(s / cap))

    demo.click("#result-command")
    query = parse_qs(urlsplit(demo.inner_text("#result-command-text").splitlines()[-1]).query)
    want_query = {k: [str(v)] for k, v in FA2_AXES.items()}
    assert {k: query[k] for k in want_query} == want_query
    assert query["variant"] == ["fast"] and query["run"] == ["1"]


def _assert_page_weights(
    page: Any,
    cfg: AttentionConfig,
    x: dict[str, np.ndarray],
    vis: np.ndarray,
    bend: Callable[[np.ndarray, int, int], np.ndarray],
) -> None:
    """The picture's weights of the last run (demo-data.js's attentionWeights), for every
    batch element and head: the softmax, over the keys `vis` shows, of the scaled scores
    after `bend(scores, b, h)` (float64; what softcap and ALiBi do to them)."""
    shapes = cfg.shapes()
    q, k = x["q"].reshape(shapes["q"]), x["k"].reshape(shapes["k"])
    scale = float(np.float32(1 / np.sqrt(cfg.head_dim)))
    for b in range(cfg.batch):
        for h in range(cfg.num_heads):
            got = page.evaluate(
                """async ([b, h]) => {
                    const d = await import('/demo/demo-data.js');
                    const r = window.demo.lastRun;
                    const { p } = d.attentionWeights(r.config, r.arrays.x, b, h);
                    return Array.from(p, (v) => (Number.isNaN(v) ? null : v));
                }""",
                [b, h],
            )
            got = np.array([np.nan if v is None else v for v in got]).reshape(vis.shape)
            kh = h // (cfg.num_heads // cfg.kv_heads)
            s = (q[b, :, h].astype(np.float64) @ k[b, :, kh].astype(np.float64).T) * scale
            s = np.where(vis, bend(s, b, h), -np.inf)
            with np.errstate(invalid="ignore"):
                e = np.exp(s - s.max(axis=1, keepdims=True))
                want = e / e.sum(axis=1, keepdims=True)
            want[~vis] = np.nan
            assert np.array_equal(np.isnan(got), ~vis), (b, h)
            np.testing.assert_allclose(got[vis], want[vis], rtol=1e-9, atol=1e-12)


# ALiBi with one slope per batch element and head, the queries aligned bottom-right
# (causal_offset = Sk - Sq = 16) without causal: only ALiBi's bias sees the offset. Keys far
# enough from the diagonal (up to 44) for the picture to show the bias.
ALIBI = TINY | {"batch": 2, "seq_q": 29, "seq_k": 45, "causal_offset": 16}


def test_fast_runs_alibi_and_the_picture_is_biased(demo: Any) -> None:
    """The fast variant runs an ALiBi case from the form and passes; the page drew the
    slopes (uniform in [0, 0.3), float32) and sent them to the server as alibi_slopes; the
    name, title and pictures say ALiBi; the page's attention weights are the reference's
    (reference.alibi_bias on the page's slopes); the command line's link carries alibi."""
    _fill(demo, ALIBI, "fast", alibi="batch")
    sent = click_run_judged(demo)
    run = demo.evaluate(
        "(({config, variant, passed, status, name}) => "
        "({config, variant, passed, status, name}))(window.demo.lastRun)"
    )
    cfg = AttentionConfig.from_dict(run["config"])
    assert (cfg.alibi_shape, cfg.causal_offset, cfg.causal) == ((2, 2), 16, False)
    assert run["variant"] == "fast" and run["passed"] and run["status"] == "pass", run
    assert demo.inner_text("#verdict") == "PASS"
    title = demo.inner_text("#result-title")
    weights = demo.inner_text("#weights")
    for part in ("bottom-right (offset 16)", "ALiBi per batch and head"):
        assert part in run["name"] and part in title and part in weights, part
    assert "ALiBi bias −" in weights and "(the slope of batch " in weights, weights
    shot(demo, "demo_alibi.png", "#result-card")
    shot(demo, "demo_alibi_weights.png", "#weights")

    x = _page_inputs(demo, "window.demo.lastRun.arrays.x")
    slopes = x["alibi_slopes"].reshape(cfg.alibi_shape)
    assert ((slopes >= 0) & (slopes <= np.float32(0.3))).all() and len(set(slopes.flat)) == 4
    slopes_sent = base64.b64decode(sent["inputs"]["alibi_slopes"])
    assert np.array_equal(np.frombuffer(slopes_sent, "<f4").reshape(slopes.shape), slopes)
    bias = alibi_bias(slopes, cfg.batch, cfg.seq_q, cfg.seq_k, cfg.causal_offset, np.float64)
    vis = np.ones((cfg.seq_q, cfg.seq_k), bool)
    _assert_page_weights(demo, cfg, x, vis, lambda s, b, h: s + bias[b, h])

    demo.click("#result-command")
    query = parse_qs(urlsplit(demo.inner_text("#result-command-text").splitlines()[-1]).query)
    assert query["alibi"] == ["batch"] and query["causal_offset"] == ["16"]
    assert query["variant"] == ["fast"] and query["run"] == ["1"]


def test_run_shows_progress_and_cancel_leaves_the_page_usable(demo: Any) -> None:
    if not _history(demo):  # the earlier result to mark stale, whatever ran before
        _fill(demo, TINY, "seed")
        click_run(demo)
    before = _history(demo)
    # A case whose repeated timing takes seconds: there is time to look and to cancel.
    _fill(demo, TINY | {"seq_q": 113, "seq_k": 203, "head_dim": 59, "repeats": 40}, "seed")
    demo.evaluate("document.body.dataset.run = ''")
    demo.click("#run")
    wait_js(demo, "!document.querySelector('#job').hidden")
    assert demo.evaluate("document.body.dataset.run") == "running"
    # The form is frozen, the earlier result marked, the clock ticks.
    assert demo.is_disabled("input[name=seq_q]") and demo.is_disabled("#run")
    assert demo.is_disabled("#compare") and demo.is_disabled("#smoke")
    assert "stale" in (demo.get_attribute("#result-card", "class") or "")
    assert demo.get_attribute("#result-banner", "data-kind") == "running"
    first = demo.inner_text("#job-elapsed")
    wait_js(demo, "document.querySelector('#job-elapsed').textContent !== arg", first)
    assert demo.inner_text("#job-step"), "no progress line"
    shot(demo, "demo_running.png")
    demo.click("#cancel")
    wait_js(demo, "document.body.dataset.run === 'cancelled'", timeout=LOAD_TIMEOUT_MS)
    assert demo.is_hidden("#job")
    assert demo.get_attribute("#result-banner", "data-kind") == "cancelled"
    assert "Cancelled" in demo.inner_text("#result-banner")
    assert "stale" in (demo.get_attribute("#result-card", "class") or "")
    assert _history(demo) == before  # the cancelled run is discarded
    assert not demo.is_disabled("input[name=seq_q]")
    shot(demo, "demo_cancelled.png")
    # And the page runs the next case as usual.
    _fill(demo, TINY, "seed")
    click_run(demo)
    assert len(_history(demo)) == len(before) + 1
    assert demo.is_hidden("#result-banner")
    assert "stale" not in (demo.get_attribute("#result-card", "class") or "")


def test_download_repeats_command_and_relative_error(demo: Any) -> None:
    """A run with repeated timing, whose server answer is edited so that O's relative error
    comes from a reference of 0 (what gave 'max rel err 3.13e+31' beside 'pass')."""

    def judge(route: Any) -> None:
        got = route.fetch().json()
        for r in got["reports"]:
            if r["name"] == "o":
                r |= {"max_rel_err": 3.13e31, "expected": 0.0}
        route.fulfill(json=got)

    demo.route("**/api/judge", judge)
    try:
        _fill(demo, TINY | {"repeats": 5}, "seed")
        click_run(demo)
    finally:
        demo.unroute("**/api/judge")
    run = demo.evaluate(
        "(({config, variant, reports, timings_ms, repeats, adapter}) => "
        "({config, variant, reports, timings_ms, repeats, adapter}))(window.demo.lastRun)"
    )
    cell = demo.locator("#errors tr[data-output=o] [data-field=max_rel_err]")
    assert cell.inner_text() == "—"
    assert "3.13e+31" in (cell.get_attribute("title") or "")
    # Elsewhere the relative error is shown, unless the same rule hides it.
    shown = shown_errors(demo)
    for r in run["reports"]:
        if r["name"] == "o":
            continue
        rel, bound, err = float(r["max_rel_err"]), float(r["bound"]), float(r["max_abs_err"])
        hidden = rel * bound > err * (1 + 1e-9) or abs(float(r["expected"] or 0)) < bound
        assert (shown[r["name"]]["max_rel_err"] == "—") == hidden, r

    # Repeated timing: median and spread over N runs.
    rows = demo.eval_on_selector_all(
        "#repeats tr[data-pass]",
        """rs => rs.map(r => Object.fromEntries([...r.querySelectorAll('[data-field]')]
            .map(td => [td.dataset.field, td.textContent])))""",
    )
    assert len(rows) == 2 and all(r["n"] == "5" for r in rows), rows
    for which, row in zip(("fwd", "bwd"), rows, strict=True):
        runs = run["repeats"][which]["runs_ms"]
        assert len(runs) == 5 and min(runs) <= run["repeats"][which]["ms"] <= max(runs)
        assert row["median"].endswith(" ms") and "–" in row["range"]
    shot(demo, "demo_repeats.png", "#result-card")

    with demo.expect_download() as dl:
        demo.click("#result-download")
    download = dl.value
    assert download.suggested_filename.endswith(".json")
    saved = json.loads(download.path().read_text())
    assert saved["config"] == run["config"] and saved["variant"] == "seed"
    assert saved["adapter"] == run["adapter"] and saved["kind"] == "run"
    assert [r["name"] for r in saved["reports"]] == [r["name"] for r in run["reports"]]
    assert saved["timings_ms"]["forward_ms"] == run["timings_ms"]["forward_ms"]
    assert saved["repeats"]["runs"] == 5 and len(saved["repeats"]["bwd"]["runs_ms"]) == 5
    assert saved["input_seed"] == TINY["input_seed"] and saved["mask"] == "none"

    demo.click("#result-command")
    text = demo.inner_text("#result-command-text")
    assert text.startswith("py-harness serve")
    url = text.splitlines()[-1]
    query = parse_qs(urlsplit(url).query)
    assert query["run"] == ["1"] and query["variant"] == ["seed"]
    want = {k: [str(v)] for k, v in TINY.items()} | {"repeats": ["5"], "causal": ["0"]}
    assert {k: query[k] for k in want} == want
    assert "WebGPU" in demo.inner_text("#result-command-note")


def test_matrix_view_counts_by_status_and_links_cases(demo: Any) -> None:
    """The whole-matrix view on four small cases, the server's answers edited so that one
    is unsupported, one a known failure and one a plain failure."""
    ids = ["d1-sq17-sk17-h4", "d18-sq113-sk59-h2-causal", "d32-sq59-sk203-mqa3x1", "d3-sq1-sk1-h4"]
    unsupported = {
        "status": "unsupported",
        "limitation": "test-driver",
        "reason": "a test's declaration",
        "cause": "tests/test_demo_page.py",
        "text": "unsupported on this driver (test-driver): a test's declaration",
    }
    known = unsupported | {"status": "known", "limitation": "test-flaw"}
    known["text"] = "known flaw (test-flaw): a test's declaration"
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
        if got["case"] == ids[3]:
            got |= {"passed": False, "status": "fail"}
        route.fulfill(json=got)

    cases_url = re.compile(r"/api/cases\?")
    demo.select_option("select[name=variant]", "seed")
    demo.route(cases_url, cases)
    demo.route("**/api/judge_case", judge_case)
    try:
        demo.evaluate("document.body.dataset.smoke = ''")
        demo.click("#matrix-all")
        wait_js(demo, "document.body.dataset.smoke === 'done'", timeout=LOAD_TIMEOUT_MS)
    finally:
        demo.unroute(cases_url)
        demo.unroute("**/api/judge_case")
    assert parse_qs(urlsplit(asked[0]).query)["set"] == ["all"]
    assert status_counts(demo) == {"pass": 1, "fail": 1, "known": 1, "unsupported": 1}
    summary = demo.inner_text("#smoke-summary")
    assert summary.startswith("1 passed, 1 known failure, 1 unsupported on this driver, 1 failed")
    assert "fail" in (demo.get_attribute("#smoke-summary", "class") or "").split()
    rows = {r["case"]: r for r in smoke_rows(demo)}
    assert rows[ids[3]]["status"] == "fail" and rows[ids[0]]["status"] == "pass"
    shot(demo, "demo_matrix.png", "#smoke-card")

    # A row's link shows that case's details and puts case=ID in the page URL.
    demo.click(f"#smoke-table a[data-case='{ids[3]}']")
    assert demo.get_attribute("#case-detail", "data-case") == ids[3]
    assert parse_qs(urlsplit(demo.url).query)["case"] == [ids[3]]
    detail = demo.inner_text("#case-detail")
    assert "FAIL" in detail and demo.locator("#case-detail tr[data-output]").count() == 5
    assert demo.inner_text("#case-command-text") == (
        f"py-harness check --runtime chromium --variant seed --case {ids[3]}"
    )
    href = demo.get_attribute(f"#smoke-table a[data-case='{ids[0]}']", "href") or ""
    assert parse_qs(urlsplit(href).query)["case"] == [ids[0]]
    # The URL's case=ID selects a case (re-read on back / forward, no reload).
    demo.evaluate(
        "id => { history.pushState(null, '', '?case=' + id); "
        "dispatchEvent(new PopStateEvent('popstate')); }",
        ids[0],
    )
    wait_js(demo, "document.querySelector('#case-detail').dataset.case === arg", ids[0])

    with demo.expect_download() as dl:
        demo.click("#matrix-download")
    saved = json.loads(dl.value.path().read_text())
    assert saved["set"] == "all" and saved["variant"] == "seed"
    assert [r["case"] for r in saved["results"]] == ids
    assert saved["counts"]["failed"] == 1 and saved["passed"] is False
    assert saved["commands"][ids[0]].endswith(f"--case {ids[0]}")
