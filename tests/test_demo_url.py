"""The demo page's URL as hostile input: every parameter it reads, given built-in property
names (constructor, __proto__, ...) and garbage, on load and on back / forward.

`?variant=constructor` once stopped start-up (a JS `in` check matched
Object.prototype.constructor) and `?mask=bogus&run=1` ran and failed. Now start-up must
reach data-state=ready, each refused parameter must be marked in the form with its message
in #form-error, run=1 must start nothing, and unknown parameters must be listed, not fatal.
One page load (Pyodide and the compiles are ~15 s); further URLs are read through
pushState + popstate, which the page handles as back / forward.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.demo_page import open_demo, shot, wait_js

pytestmark = pytest.mark.browser

BUILTINS = ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "prototype"]
FIELDS = [
    "batch",
    "num_heads",
    "num_kv_heads",
    "seq_q",
    "seq_k",
    "head_dim",
    "causal_offset",
    "window",
    "window_left",
    "window_right",
    "seed",
    "input_seed",
    "repeats",
    "dropout_p",
    "softcap",
    "causal",
    "mask",
    "alibi",
    "variant",
]
# Garbage that is no built-in name: markup, a NUL, an overflowing number, an empty value.
GARBAGE = ["<img src=x onerror=alert(1)>", "\x00bogus", "1e999", " ", "bogus"]

# On load: each field gets a different bad value, run=1 asks for a run, case names no case,
# and every built-in name comes as a parameter of its own.
LOAD_VALUES = dict(zip(FIELDS, (BUILTINS * 4)[: len(FIELDS)], strict=True)) | {
    "mask": "bogus",
    "seq_k": "1e999",
    "window": GARBAGE[0],
    "variant": "constructor",
}
LOAD_QUERY = urlencode(
    LOAD_VALUES | {"case": "constructor", "run": "1"} | {b: "1" for b in BUILTINS} | {"bogus": "x"}
)


@pytest.fixture(scope="module")
def fuzzed(chromium: Any, harness_server: str) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    judged: list[str] = []
    page, errors = open_demo(context, harness_server, f"?{LOAD_QUERY}")
    page.on("request", lambda r: "/api/judge" in r.url and judged.append(r.url))
    yield page, errors, judged
    assert not errors, errors
    context.close()


def _form_state(page: Any) -> dict[str, Any]:
    return page.evaluate(
        """() => ({
            state: document.body.dataset.state,
            run: document.body.dataset.run ?? null,
            error: document.querySelector('#form-error').textContent,
            invalid: [...document.querySelectorAll('#case-form [aria-invalid=true]')]
                .map(e => e.name),
            note: document.querySelector('#url-note').textContent,
            runDisabled: document.querySelector('#run').disabled,
            history: window.demo.history.length,
            injected: document.querySelectorAll('img[src=x]').length,
        })"""
    )


def _navigate(page: Any, query: str) -> dict[str, Any]:
    """Re-read the URL as on back / forward, and wait for the form's verdict on it."""
    page.evaluate("document.querySelector('#form-error').textContent = 'pending'")
    page.evaluate(
        "q => { history.pushState(null, '', '?' + q); "
        "dispatchEvent(new PopStateEvent('popstate')); }",
        query,
    )
    wait_js(page, "document.querySelector('#form-error').textContent !== 'pending'")
    return _form_state(page)


def _assert_refused(got: dict[str, Any], fields: list[str], where: str) -> None:
    assert got["state"] == "ready", where
    assert got["run"] is None and got["history"] == 0, where  # nothing ran
    assert got["runDisabled"], where
    assert got["injected"] == 0, where  # values are text, never markup
    for name in fields:
        assert name in got["invalid"], (name, where, got)
        assert f"{name}:" in got["error"], (name, where, got["error"])


def test_garbage_link_loads_refuses_and_runs_nothing(fuzzed: Any) -> None:
    page, errors, judged = fuzzed
    got = _form_state(page)
    shot(page, "demo_url_fuzz.png", "#case-card")
    _assert_refused(got, FIELDS, "on load")
    assert not judged and not errors
    assert 'variant: unknown "constructor"; known: seed, fast' in got["error"], got["error"]
    assert 'mask: unknown preset "bogus"' in got["error"], got["error"]
    want = f'alibi: unknown preset "{LOAD_VALUES["alibi"]}"; known: none, head, batch'
    assert want in got["error"], got["error"]
    # Unknown parameters are listed, the unknown case is named, nothing else happened.
    for name in [*BUILTINS, "bogus"]:
        assert f'"{name}"' in got["note"], (name, got["note"])
    assert 'case: unknown "constructor"' in got["note"], got["note"]
    assert page.is_hidden("#case-detail")


@pytest.mark.parametrize("value", BUILTINS + GARBAGE)
def test_every_parameter_refuses(fuzzed: Any, value: str) -> None:
    """Every parameter the page reads set to `value` at once (and `value` as a name)."""
    page, errors, judged = fuzzed
    query = urlencode({n: value for n in FIELDS} | {"case": value, "run": "1", value: "1"})
    got = _navigate(page, query)
    # A blank int is no int, a blank select no preset; "1e999" is a float (dropout_p's
    # syntax accepts it, Python's range check refuses it).
    _assert_refused(got, [f for f in FIELDS if f != "dropout_p" or value != "1e999"], value)
    if value.strip():
        assert "case: unknown" in got["note"], got["note"]
    assert not judged and not errors


def test_one_bad_parameter_among_good_ones(fuzzed: Any) -> None:
    """?variant=constructor alone: only the variant is refused, with the known names; a
    valid link afterwards makes the form valid again."""
    page, errors, _ = fuzzed
    good = {"batch": 1, "num_heads": 2, "num_kv_heads": 1, "seq_q": 9, "seq_k": 13}
    got = _navigate(page, urlencode(good | {"variant": "constructor", "run": "1"}))
    assert got["invalid"] == ["variant"], got
    assert got["error"] == 'variant: unknown "constructor"; known: seed, fast', got["error"]
    got = _navigate(page, urlencode(good | {"mask": "__proto__"}))
    assert got["invalid"] == ["mask"]
    assert got["error"].startswith('mask: unknown preset "__proto__"'), got["error"]
    got = _navigate(page, urlencode(good | {"causal": "toString"}))
    assert got["invalid"] == ["causal"] and "causal:" in got["error"]
    got = _navigate(page, urlencode(good | {"alibi": "__proto__"}))
    assert got["invalid"] == ["alibi"]
    assert got["error"] == 'alibi: unknown preset "__proto__"; known: none, head, batch', got
    got = _navigate(page, urlencode(good | {"variant": "seed", "mask": "keypad"}))
    assert got["error"] == "" and got["invalid"] == [] and not got["runDisabled"], got
    assert _form_values(page) == {
        "batch": "1",
        "seq_k": "13",
        "mask": "keypad",
        "alibi": "none",
        "variant": "seed",
    }
    assert not errors


def test_alibi_round_trips(fuzzed: Any) -> None:
    """alibi=batch in a link sets the select, the form is valid for the fast variant (the
    seed refuses it in its own words) and the URL the page writes back carries it."""
    page, errors, _ = fuzzed
    good = {"batch": 2, "num_heads": 2, "num_kv_heads": 1, "seq_q": 9, "seq_k": 13}
    got = _navigate(page, urlencode(good | {"variant": "fast", "alibi": "batch"}))
    assert got["error"] == "" and got["invalid"] == [] and not got["runDisabled"], got
    assert _form_values(page)["alibi"] == "batch"
    assert page.evaluate("window.demo.readForm().config.alibi_shape") == [2, 2]
    page.evaluate("window.demo.updateUrl()")
    assert parse_qs(urlsplit(page.url).query)["alibi"] == ["batch"]
    got = _navigate(page, urlencode(good | {"variant": "seed", "alibi": "head"}))
    assert got["error"] == "variant: seed does not support alibi (alibi_shape=[2])", got
    assert sorted(got["invalid"]) == ["alibi", "variant"], got
    assert not errors


def _form_values(page: Any) -> dict[str, str]:
    return page.evaluate(
        "Object.fromEntries(['batch', 'seq_k', 'mask', 'alibi', 'variant'].map("
        "n => [n, document.querySelector('#case-form').elements[n].value]))"
    )
