"""The demo page driven by Playwright: opening it, waiting on it, reading its tables, and
screenshots under test-results/. Shared by the test_demo_*.py modules, each of which opens
one page for all its tests (Pyodide start-up and the pipeline compiles happen once)."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterator
from typing import Any

from playwright.sync_api import Error as PlaywrightError

from py_harness.host.paths import output_dir

RESULTS = output_dir().parent / "test-results"
LOAD_TIMEOUT_MS = 120_000  # Pyodide start + SwiftShader pipeline compiles on 2 busy cores


def wait_js(page: Any, expr: str, arg: Any = None, timeout: float = 30_000) -> None:
    """page.wait_for_function for an expression (of `arg`): as a function, since the server's
    Content-Security-Policy has no 'unsafe-eval' and Playwright evals a bare string."""
    page.wait_for_function(f"(arg) => ({expr})", arg=arg, timeout=timeout)


def open_demo(context: Any, base_url: str, query: str = "") -> tuple[Any, list[str]]:
    """A new page of `context` on the demo (with `query`), loaded until it leaves 'loading';
    the list collects page errors and requests that leave the harness server.

    A renderer that crashes while loading (Chromium's "Target crashed", about one load in
    twenty with three pages loading Pyodide at once on two cores) gets one fresh page, with
    a warning that names it, as the harness's own sessions do; a second crash fails."""
    try:
        return _open_demo(context, base_url, query)
    except PlaywrightError as exc:
        if "crashed" not in str(exc):
            raise
        warnings.warn(
            f"demo page: the renderer crashed while loading ({exc}); one retry", stacklevel=2
        )
        return _open_demo(context, base_url, query)


def _open_demo(context: Any, base_url: str, query: str) -> tuple[Any, list[str]]:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # Offline: every request goes to the harness server (data: and blob: URLs never leave).
    page.on(
        "request",
        lambda r: (
            r.url.startswith((base_url, "data:", "blob:")) or errors.append(f"fetched {r.url}")
        ),
    )
    page.goto(f"{base_url}/demo/index.html{query}")
    wait_js(page, "document.body.dataset.state !== 'loading'", timeout=LOAD_TIMEOUT_MS)
    return page, errors


def shot(page: Any, name: str, card: str = "") -> None:
    """The whole page as `name`; with `card` (a selector), also that element alone, as
    name-card.png, to read at full size."""
    RESULTS.mkdir(exist_ok=True)
    page.screenshot(path=str(RESULTS / name), full_page=True)
    if card:
        page.locator(card).screenshot(path=str(RESULTS / name.replace(".png", "-card.png")))


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


def demo_page(chromium: Any, harness_server: str) -> Iterator[Any]:
    """A ready demo page with downloads and the clipboard allowed; its stage timings go to
    test-results/demo_load_timings.json; page errors and off-server requests fail it."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=harness_server)
    t0 = time.perf_counter()
    page, errors = open_demo(context, harness_server)
    state = page.evaluate("document.body.dataset.state")
    assert state == "ready", page.inner_text("main")[:2000]
    timings = {"ready_s": time.perf_counter() - t0, **page.evaluate("window.demo.stageTimes")}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "demo_load_timings.json").write_text(json.dumps(timings, indent=1))
    yield page
    assert not errors, errors
    context.close()


def shown_errors(page: Any) -> dict[str, dict[str, str]]:
    return page.eval_on_selector_all(
        "#errors tr[data-output]",
        """rows => Object.fromEntries(rows.map(r => [r.dataset.output, Object.fromEntries(
            [...r.querySelectorAll('[data-field]')].map(td => [td.dataset.field, td.textContent])
        )]))""",
    )


def click_run(page: Any) -> None:
    """Click Run and wait until the case from the form is done."""
    page.evaluate("document.body.dataset.run = ''")
    page.click("#run")
    wait_js(page, "['done', 'error'].includes(document.body.dataset.run)", timeout=LOAD_TIMEOUT_MS)
    assert page.evaluate("document.body.dataset.run") == "done", page.inner_text("#run-status")


def click_run_judged(page: Any) -> dict[str, Any]:
    """click_run, and the body the page posted to /api/judge for the run."""
    # The request comes after the run, which may first compile the variant's pipelines (tens
    # of seconds on SwiftShader while another worker's page runs the smoke suite).
    with page.expect_request(
        lambda r: r.url.endswith("/api/judge"), timeout=LOAD_TIMEOUT_MS
    ) as judge:
        click_run(page)
    return judge.value.post_data_json


def smoke_rows(page: Any) -> list[dict[str, Any]]:
    return page.eval_on_selector_all(
        "#smoke-table tbody tr",
        """rs => rs.map(r => ({case: r.dataset.case, status: r.dataset.status,
            passed: r.dataset.passed ?? null, verdict: r.children[1].textContent,
            title: r.children[1].title, text: r.textContent}))""",
    )


def summary_counts(results: list[dict[str, Any]], variant: str) -> str:
    """The matrix summary's counts; `variant` names what skipped cases are not supported by."""
    statuses = ("pass", "known", "unsupported", "skipped")
    n = {s: sum(r["status"] == s for r in results) for s in statuses}
    parts = [f"{n['pass']} passed"]
    if n["known"]:
        parts.append(f"{n['known']} known failure{'s' if n['known'] > 1 else ''}")
    if n["unsupported"]:
        parts.append(f"{n['unsupported']} unsupported on this driver")
    if n["skipped"]:
        parts.append(f"{n['skipped']} not supported by {variant}")
    return ", ".join(parts + [f"{len(results) - sum(n.values())} failed"])


def status_counts(page: Any) -> dict[str, int]:
    """The matrix view's counts by status."""
    return page.eval_on_selector_all(
        "#matrix-counts [data-status]",
        "els => Object.fromEntries(els.map(e => [e.dataset.status, Number(e.dataset.count)]))",
    )
