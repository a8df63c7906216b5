"""The harness as a pytest plugin (entry point `pytest11: py_harness`): what a team with its own
WGSL kernels uses, and what the project's own tests and the `check` command use.

Options (also as ini keys, see `pytest --help`): `--runtime`, `--variant`, `--variant-file`,
`--draws`, `--long`, `--case`, `--harness-json`, `--browser-ws`.

Fixtures, in scope order: `harness_server` (the page server, wheel built), `chromium_launch_args`
(override to change Chromium's path or flags), `launched` (each runtime launched once),
`chromium` (the Playwright browser), `harness_pool` (sessions handed between modules),
`harness` (a session on one runtime, parametrized over `--runtime`, one per module, taken
from the pool and given back after it), `variant` (parametrized over `--variant`), `matrix_case`
(parametrized with `variant` over each variant's matrix: the fixed one, or the cases generated
inside its envelope; smoke cases marked `smoke`), `case_inputs` (the inputs of a case's draw),
`judge` (judges outputs from arrays), `run_case` (runs and judges a case on `harness`,
skipping what a variant or driver does not support and xfailing declared kernel flaws) and
`catches` (plants a bug in the variant's WGSL and says which smoke case fails on it). A whole
matrix test is:

    def test_case(run_case, matrix_case):
        run_case(matrix_case)

Markers: `smoke`, `long` (skipped unless --long), `browser` (needs a WebGPU runtime), `slow`,
`needs_adapter(feature=..., limits={...})`, which skips a test whose session's adapter
lacks a feature or limit, `needs_runtime(*names)`, which skips a test (one that drives a
runtime itself, without `harness`) where a named runtime is not installed here, saying how
to install it, `variants(*names)`, which runs a test for those of the selected variants
only, and `harness_private` (a module's sessions are not handed on).
Known kernel flaws and driver limitations are data (judge/limitations.py), not markers.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import pickle
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .. import base64_tensors
from ..kernels import VARIANTS
from ..wgsl_source import strip_comments
from . import artifacts
from . import variants as variant_registry
from .engine import compile_error, evaluate, evaluate_forward_first, inputs_for
from .judge import blocks, generated, limitations, report
from .judge.cases import CASES, Case, by_id
from .judge.inputs import CaseResult, make_inputs
from .judge.limitations import Limitation, case_coverage
from .judge.verdict import judge_outputs
from .paths import cannot_write_file
from .reproducers import reproduce
from .runtimes.chromium import chromium_launch_args as default_launch_args
from .runtimes.registry import RUNTIMES, Launched, parse_runtimes, runtime
from .runtimes.sessions import Session

OUTCOME_PROPERTY = "harness_outcome"  # a test's Outcome, as JSON in its user_properties
ADAPTER_PROPERTY = "harness_adapter"  # {runtime: adapter info}
MARKERS = (
    "browser: needs a WebGPU runtime (a browser, Node or a native backend)",
    "slow: takes more than a few seconds",
    "smoke: the fast subset of the case matrix",
    "long: a GPU-sized case, skipped unless --long",
    "variants(*names): run the test for these of the selected variants only",
    "needs_adapter(feature=None, limits=None): skip unless the session's adapter has the "
    "feature and the limits (a dict of minimums)",
    "needs_runtime(*names): skip unless each named runtime (wgpu, dawn, node, chromium, "
    "firefox) is installed on this machine; the reason says what is missing",
    "harness_private: this module's `harness` sessions are closed after it, not handed to "
    "the next module (for tests that crash, hang or rewire their session on purpose)",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("py-harness", "WGSL attention kernels judged on WebGPU")
    group.addoption(
        "--runtime",
        default=None,
        help=f"comma-separated WebGPU runtimes: {', '.join(RUNTIMES)} or all "
        "(default: ini harness_runtimes, else all)",
    )
    group.addoption(
        "--variant",
        default=None,
        help="comma-separated kernel variants, built in "
        f"({', '.join(VARIANTS)}) or from --variant-file (default: ini harness_variants, "
        "else every variant)",
    )
    group.addoption(
        "--variant-file",
        action="append",
        default=[],
        type=Path,
        help="a TOML file declaring a kernel variant (repeatable; docs/own-kernels.md)",
    )
    group.addoption(
        "--draws",
        type=int,
        default=1,
        help="judge each matrix case on N seeded input draws (default 1: draw 0)",
    )
    group.addoption(
        "--long", action="store_true", help="also run the long cases (GPU-sized; slow on CPUs)"
    )
    group.addoption(
        "--case", action="append", default=[], help="only this matrix case id (repeatable)"
    )
    group.addoption(
        "--shaders",
        type=Path,
        help="judge the built-in variants with the .wgsl files of this folder (an edited copy)",
    )
    group.addoption("--harness-json", type=Path, help="write the matrix's outcomes here as JSON")
    group.addoption(
        "--judge-workers",
        type=int,
        default=None,
        help="threads the float64 reference and baselines use (default: one per core)",
    )
    group.addoption(
        "--browser-ws",
        default=None,
        help="reach Chromium through a Playwright browser server at this ws:// endpoint "
        "(`py-harness browser-server` starts one) instead of launching it",
    )
    # pytest-playwright's options of these names, where it registered first, mean the same
    with contextlib.suppress(ValueError):
        group.addoption(
            "--browser-channel",
            default=None,
            help="Chromium: an installed Chrome or Edge by Playwright's channel name "
            "(chrome, chrome-beta, msedge, ...) instead of Chromium",
        )
    with contextlib.suppress(ValueError):
        group.addoption("--headed", action="store_true", help="Chromium with its window shown")
    with contextlib.suppress(ValueError):
        group.addoption(
            "--slowmo", type=float, default=0, help="Chromium: ms between Playwright's steps"
        )
    with contextlib.suppress(ValueError):
        group.addoption(
            "--output",
            default="test-results",
            help="where a failing case's artifacts go: inputs and outputs (.npz), the verdict, "
            "the runtime's console, the command that replays it (default: test-results)",
        )
    with contextlib.suppress(ValueError):
        group.addoption(
            "--tracing",
            choices=("off", "retain-on-failure"),
            default="off",
            help="Chromium: a Playwright trace of each case, kept with a failing case's "
            "artifacts (default: off)",
        )
    group.addoption(
        "--artifacts",
        choices=("failures", "all", "none"),
        default="failures",
        help="which cases leave artifacts under --output (default: failures, errors included)",
    )
    parser.addini("harness_runtimes", "default for --runtime", default="")
    parser.addini("harness_variants", "default for --variant", default="")
    parser.addini(
        "harness_variant_files", "variant TOML files, relative to the ini file", type="paths"
    )


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    for name in ("--draws", "--judge-workers"):
        if (value := config.getoption(name)) is not None and value < 1:
            raise pytest.UsageError(f"{name}: must be >= 1, got {value}")
    blocks.WORKERS = config.getoption("--judge-workers")
    files = [*config.getini("harness_variant_files"), *config.getoption("--variant-file")]
    config.harness_variant_files = files  # also named by a failing case's replay command
    config.harness_registry_before = variant_registry.snapshot()
    try:
        for path in files:
            variant_registry.load_file(Path(path))
        config.harness_runtimes = parse_runtimes(_setting(config, "runtime", "all"))
        config.harness_variants = variant_registry.parse(_setting(config, "variant", "all"))
        if config.getoption("--shaders"):
            variant_registry.use_shader_dir(config.getoption("--shaders"), config.harness_variants)
        config.harness_cases = [_case(config, c) for c in config.getoption("--case")]
    except (KeyError, ValueError, OSError) as exc:
        raise pytest.UsageError(str(exc.args[0] if isinstance(exc, KeyError) else exc)) from None
    if (path := config.getoption("--harness-json")) and (why := cannot_write_file(path)):
        raise pytest.UsageError(f"--harness-json: {why}")
    config.pluginmanager.register(Results(config), "py-harness-results")
    # Where each run leaves its outputs, so that runtimes can be compared after the run even
    # when pytest-xdist ran them in different processes (workers inherit the variable):
    # beside --harness-json, which names them, so that `py-harness merge` can compare them
    # with another machine's; else a temporary folder.
    if "HARNESS_OUTPUTS_DIR" not in os.environ:
        kept = Path(path).parent / "outputs" if path else None
        if kept is not None:
            kept.mkdir(parents=True, exist_ok=True)
        where = str(kept) if kept else tempfile.mkdtemp(prefix="harness-outputs-")
        os.environ["HARNESS_OUTPUTS_DIR"] = where


def pytest_unconfigure(config: pytest.Config) -> None:
    if before := getattr(config, "harness_registry_before", None):
        variant_registry.restore(before)


def _case(config: pytest.Config, case_id: str) -> Case:
    """--case: a case of a judged variant's matrix (with its flags), or any id at all,
    parsed (cases.by_id)."""
    for name in config.harness_variants:
        for case in variant_registry.matrix(name):
            if case.id == case_id:
                return case
    return by_id(case_id)


def _setting(config: pytest.Config, name: str, default: str) -> str:
    return config.getoption(f"--{name}") or config.getini(f"harness_{name}s") or default


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for mark in item.iter_markers("needs_runtime"):
            # no name at all is as wrong as an unknown one
            if unknown := [n for n in mark.args or ("",) if n not in RUNTIMES]:
                raise pytest.UsageError(
                    f"{item.nodeid}: needs_runtime({unknown[0]!r}): name one or more of "
                    f"{', '.join(RUNTIMES)}"
                )
    if config.getoption("--long") or config.harness_cases:
        return
    skip = pytest.mark.skip(reason="a long case: run with --long (GPU-sized; slow on CPUs)")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


def _order(variant: str) -> dict[str, int]:
    """Each case id's place in the variant's matrix."""
    return {c.id: i for i, c in enumerate(variant_registry.matrix(variant))}


def _outside_line(variant: str, cases: list[tuple[str, str]]) -> str:
    """How many of the fixed matrix's cases lie outside the variant's envelope, and why,
    grouped by the rule (the values each case gives aside)."""
    reasons: dict[str, int] = {}
    for _, why in cases:
        rule = why.removeprefix("outside the envelope: ").split(" (")[0]
        reasons[rule] = reasons.get(rule, 0) + 1
    shown = "; ".join(f"{rule}: {n}" for rule, n in sorted(reasons.items(), key=lambda r: -r[1]))
    return (
        f"py-harness: {variant}: {len(cases)} of the fixed matrix's cases lie outside its "
        f"envelope, not run ({shown}); ids in --harness-json"
    )


def _marks(case: Case) -> list[pytest.MarkDecorator]:
    return [m for m, on in ((pytest.mark.smoke, case.smoke), (pytest.mark.long, case.long)) if on]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if "harness" in metafunc.fixturenames:
        metafunc.parametrize("harness", config.harness_runtimes, indirect=True, scope="module")
    only = metafunc.definition.get_closest_marker("variants")
    chosen = [v for v in config.harness_variants if only is None or v in only.args]
    both = {"variant", "matrix_case"} <= set(metafunc.fixturenames)
    if both:  # each variant over its own matrix (an envelope's generated cases)
        params = [
            pytest.param(v, c, id=f"{v}-{c.id}", marks=_marks(c))
            for v in chosen
            for c in config.harness_cases or variant_registry.matrix(v)
        ]
        metafunc.parametrize(("variant", "matrix_case"), params)
    elif "variant" in metafunc.fixturenames:
        metafunc.parametrize("variant", chosen)
    elif "matrix_case" in metafunc.fixturenames:
        cases = config.harness_cases or CASES
        params = [pytest.param(c, id=c.id, marks=_marks(c)) for c in cases]
        metafunc.parametrize("matrix_case", params)
    if "limitation" in metafunc.fixturenames:
        smoke = pytest.mark.smoke  # reproducers are quick, and a stale one must show early
        params = [pytest.param(lim, id=lim.name, marks=smoke) for lim in limitations.LIMITATIONS]
        metafunc.parametrize("limitation", params)


# ---- runtimes ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def harness_server() -> Iterator[str]:
    """The harness server on a free loopback port, with the Pyodide wheel and lock built."""
    from .dist.build_wheel import build
    from .serving.server import start_server, stop

    build(log=lambda _msg: None)
    server, base_url = start_server()
    yield base_url
    stop(server)


@pytest.fixture(scope="session")
def chromium_launch_args(pytestconfig: pytest.Config) -> dict[str, Any]:
    """Override this fixture to change Chromium's path or flags."""
    if pytestconfig.getoption("--browser-ws"):
        return {}  # the browser server decides them, on its machine (this one needs none)
    return default_launch_args(
        headless=not pytestconfig.getoption("--headed"),
        channel=pytestconfig.getoption("--browser-channel"),
        slow_mo=pytestconfig.getoption("--slowmo"),
    )


@pytest.fixture(scope="session")
def launched(
    pytestconfig: pytest.Config, request: pytest.FixtureRequest
) -> Iterator[dict[str, Launched]]:
    """Each runtime launched at most once per test session (per xdist worker), on first use.
    Chromium's launch args are asked for only when Chromium is launched: a run of the
    native runtimes needs no Chromium installed (a GPU machine often has none)."""
    options: dict[str, Any] = {"tracing": pytestconfig.getoption("--tracing") != "off"}
    if pytestconfig.getoption("--browser-ws"):
        options["ws_endpoint"] = pytestconfig.getoption("--browser-ws")
    with contextlib.ExitStack() as stack:

        class Lazy(dict):
            def __missing__(self, name: str) -> Launched:
                args = request.getfixturevalue("chromium_launch_args") if name == "chromium" else {}
                self[name] = stack.enter_context(runtime(name).launch(**options, launch_args=args))
                return self[name]

        yield Lazy()


def runtime_missing(name: str, config: pytest.Config) -> str | None:
    """Why the `harness` fixture would skip runtime `name` in this run (None: it runs it).
    Chromium behind a browser server (--browser-ws) needs nothing installed here."""
    if name == "chromium" and config.getoption("--browser-ws"):
        return None
    return runtime(name).missing()


@pytest.fixture(scope="session")
def chromium(pytestconfig: pytest.Config, launched: dict[str, Launched]) -> Any:
    """The session's Playwright Chromium browser (for tests that drive pages themselves)."""
    reason = runtime_missing("chromium", pytestconfig)
    if reason:
        pytest.skip(reason)
    return launched["chromium"].browser  # type: ignore[attr-defined]


class SessionPool:
    """Sessions handed from one test module to the next, per runtime (per xdist worker): a
    module starts with the device, and the pipelines, its predecessor left. On SwiftShader
    a new session compiles the fast variant's head_dim-64 kernels in about 4 s and its
    head_dim-128 ones in about 6.5 s, and Chromium shares none of it between pages
    (docs/scaling.md). A session goes back only if it still answers a ping (the service
    gets itself a new device after a loss); a module marked `harness_private` gets a new
    session and closes it, leaving the idle one for the module after it."""

    def __init__(self, launched: dict[str, Launched]) -> None:
        self._launched = launched
        self._idle: dict[str, Session] = {}

    def take(self, name: str, base_url: str, *, private: bool = False) -> Session:
        """The idle session of the runtime, or a new one. private: always a new one, and
        the idle one stays for the next module (a private module's session is closed)."""
        if private:
            return self._launched[name].new_session(base_url)
        return self._idle.pop(name, None) or self._launched[name].new_session(base_url)

    def give(self, name: str, session: Session, keep: bool) -> None:
        if keep and name not in self._idle and self._answers(session):
            self._idle[name] = session
        else:
            self._launched[name].close_session(session)

    @staticmethod
    def _answers(session: Session) -> bool:
        try:
            session.call("ping", {})
        except Exception:  # any failure: the session is not handed on
            return False
        return True

    def close(self) -> None:
        while self._idle:
            name, session = self._idle.popitem()
            self._launched[name].close_session(session)


@pytest.fixture(scope="session")
def harness_pool(launched: dict[str, Launched]) -> Iterator[SessionPool]:
    """The sessions `harness` hands between modules; closed before the runtimes stop."""
    pool = SessionPool(launched)
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def harness(request: pytest.FixtureRequest, harness_pool: SessionPool) -> Iterator[Session]:
    """A loaded harness on the runtime the test is parametrized with (one per module: the
    one the previous module used, where it is still healthy; SessionPool)."""
    rt = runtime(request.param)
    reason = runtime_missing(rt.name, request.config)
    if reason:
        pytest.skip(f"{rt.name} not available: {reason}")
    base_url = request.getfixturevalue("harness_server") if rt.needs_server else ""
    private = request.node.get_closest_marker("harness_private") is not None
    session = harness_pool.take(rt.name, base_url, private=private)
    yield session
    harness_pool.give(rt.name, session, keep=not private)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Applies the needs_runtime marker: skips before any fixture launches anything."""
    for mark in item.iter_markers("needs_runtime"):
        for name in mark.args:
            if why := runtime(name).missing():
                pytest.skip(f"{name}: {why}")


@pytest.fixture(autouse=True)
def _variant_features(request: pytest.FixtureRequest) -> None:
    """Skips a test of a variant whose kernels need an adapter feature the session's
    adapter lacks (shader-f16 for f16 tensors): unsupported there, never red; a matrix
    case is recorded as such."""
    names = request.fixturenames
    if "harness" not in names or "variant" not in names:
        return
    harness, variant = request.getfixturevalue("harness"), request.getfixturevalue("variant")
    missing = variant_registry.get(variant).missing_features(harness.adapter()["features"])
    if not missing:
        return
    why = f"{missing}; {harness.adapter_name()} does not offer it"
    if "matrix_case" in names:
        case = request.getfixturevalue("matrix_case")
        outcome = report.Outcome(case.id, harness.runtime, "unsupported", math.nan, why)
        _record_adapter(request.node, harness)
        _record(request.node, outcome, variant)
    pytest.skip(why)


@pytest.fixture(autouse=True)
def _needs_adapter(request: pytest.FixtureRequest) -> None:
    """Applies the needs_adapter marker to tests that use a harness session."""
    mark = request.node.get_closest_marker("needs_adapter")
    if mark is None or "harness" not in request.fixturenames:
        return
    adapter = request.getfixturevalue("harness").adapter()
    feature = mark.kwargs.get("feature")
    if feature and feature not in adapter["features"]:
        pytest.skip(f"the adapter lacks the feature {feature!r}")
    for name, least in (mark.kwargs.get("limits") or {}).items():
        if adapter["limits"].get(name, 0) < least:
            pytest.skip(f"the adapter's {name} is {adapter['limits'].get(name)} < {least}")


# ---- judging ----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def draws(pytestconfig: pytest.Config) -> int:
    """How many input draws each matrix case is judged on (--draws)."""
    return pytestconfig.getoption("--draws")


@pytest.fixture
def case_inputs(matrix_case: Case) -> dict[str, np.ndarray]:
    """Draw 0's inputs of the case (q, k, v, d_out, the mask and ALiBi slopes, float32)."""
    return make_inputs(matrix_case)


@pytest.fixture(scope="session")
def judge() -> Callable[..., Any]:
    """verdict.judge_outputs: (config, inputs, outputs) arrays -> (reports, references)."""
    return judge_outputs


@pytest.fixture
def run_case(
    request: pytest.FixtureRequest, harness: Session, variant: str, draws: int
) -> Callable[..., report.Outcome]:
    """run_case(case): the case on `harness` with `variant` over --draws input draws
    (run_case(case, draw=N): draw N alone). Skips what the variant does not support or a
    declared driver limitation covers, xfails a declared kernel flaw's failure, and fails
    with the report otherwise."""

    def run(case: Case, draw: int | None = None) -> report.Outcome:
        # An error shows the test's line and the exception, not this function's source.
        __tracebackhide__ = True
        node = request.node
        refusal = variant_registry.refusal(variant, case.config())
        if refusal:
            pytest.skip(refusal)
        adapter = harness.adapter_name()
        _record_adapter(node, harness)
        covered = case_coverage(variant, adapter, case)
        if covered is not None and covered.status == "unsupported":
            o = report.Outcome(case.id, harness.runtime, "unsupported", float("nan"), str(covered))
            _record(node, o, variant)
            pytest.skip(str(covered))
        refused = None
        console = getattr(harness, "console", None)
        mark = console.mark() if console is not None else 0
        tracing = getattr(harness, "trace_start", lambda: False)()
        which = range(draws) if draw is None else [draw]
        try:
            results = [evaluate(case, harness, variant=variant, draw=d) for d in which]
        except Exception as exc:  # recorded as an error for the matrix, then raised as it is
            error = f"{type(exc).__name__}: {exc}"
            o = report.Outcome(case.id, harness.runtime, "error", math.inf, error)
            _record(node, o, variant)
            _keep_artifacts(request, harness, variant, case, which[0], None, error, mark, tracing)
            tracing = False
            refused = compile_error(exc)
            if refused is None:
                raise
        if refused is not None:  # the WGSL's fault: the compiler's words, not the harness's stack
            where = f"{case.id} ({variant}) on {harness.runtime}"
            pytest.fail(f"{where}: the WGSL did not compile\n{refused}", pytrace=False)
        o = report.outcome(results, covered)
        if o.status not in ("pass", "known") or request.config.getoption("--artifacts") == "all":
            shown = max(results, key=lambda r: (not r.passed, max(x.ratio for x in r.reports)))
            verdict = f"{o.status}: {o.detail}" if o.detail else o.status
            _keep_artifacts(
                request, harness, variant, case, shown.draw, shown, verdict, mark, tracing
            )
            tracing = False
        if tracing:  # no artifacts for this case: its trace chunk is dropped
            harness.trace_stop(None)  # type: ignore[attr-defined]
        saved = ""
        # read by the comparison of runtimes, and by `py-harness merge` from --harness-json
        if len(request.config.harness_runtimes) > 1 or request.config.getoption("--harness-json"):
            folder = Path(os.environ["HARNESS_OUTPUTS_DIR"])
            saved = str(report.save_outputs(results[0], folder, variant))
        _record(node, o, variant, saved)
        if o.status == "known":
            pytest.xfail(o.detail)
        if o.status != "pass":  # the verdict is the whole message: no traceback under it
            pytest.fail(f"{case.id} ({variant}) on {harness.runtime}:\n{o.detail}", pytrace=False)
        return o

    return run


@pytest.fixture
def run_in_page(harness: Session) -> Callable[..., Any]:
    """run_in_page(fn, *args): fn(service, *args) run where the harness's runtime runs its
    Python (the page's Pyodide for chromium and firefox, Pyodide in Node, the worker or
    this process for dawn and wgpu), awaited there if it is a coroutine; returns its value.
    fn is sent as its source: a module-level or nested function that imports what it uses
    (py_harness's modules are there) and takes no closure; args and the value are pickled.
    `service` is the runtime's HarnessService: its device() and entries (run_case, ...)."""

    def run(fn: Callable[..., Any], *args: Any) -> Any:
        __tracebackhide__ = True
        source = textwrap.dedent(inspect.getsource(fn))
        request = {
            "source": source,
            "name": fn.__name__,
            "args": base64_tensors.encode(pickle.dumps(args, protocol=4)),
        }
        reply = harness.call("run_python", request)
        return pickle.loads(base64_tensors.decode("value", reply["value"]))

    return run


@pytest.fixture
def catches(harness: Session, variant: str) -> Callable[[str, str], str | None]:
    """catches(old, new): plant a bug in the variant's WGSL (the first `old` outside comments,
    in each file holding one, becomes `new`) and judge the variant's smoke cases with it,
    each forward first; returns the id of the first case that fails (the bug is caught) or
    None (it survived every one). An edit that matches no code, or WGSL that does not
    compile, fails the test: neither is a planted bug."""

    def run(old: str, new: str) -> str | None:
        __tracebackhide__ = True
        sources = variant_registry.sources(variant)
        edited = {}
        for name, text in sources.items():
            at = strip_comments(text).find(old)  # comments blanked in place: same offsets
            if at >= 0:
                edited[name] = text[:at] + new + text[at + len(old) :]
        if not edited:
            pytest.fail(f"catches: {old!r} is in no code of {variant}'s WGSL", pytrace=False)
        planted = {**sources, **edited}
        adapter = harness.adapter_name()
        for case in variant_registry.matrix(variant):
            if not case.smoke or variant_registry.refusal(variant, case.config()):
                continue
            if case_coverage(variant, adapter, case) is not None:
                continue
            result = evaluate_forward_first(case, harness, sources=planted, variant=variant)
            if not result.passed:
                return case.id
        return None

    return run


@pytest.fixture
def check_limitation(
    request: pytest.FixtureRequest, harness: Session, variant: str
) -> Callable[[Limitation], None]:
    """check_limitation(lim): runs a declared limitation's reproducer where it applies; one
    that no longer reproduces fails as stale (its declaration is out of date)."""

    def run(lim: Limitation) -> None:
        if not lim.concerns(variant) or not lim.applies_to(harness.adapter_name(), harness.runtime):
            pytest.skip(f"{lim.name} does not concern {variant} on this adapter")
        still, what = reproduce(lim, harness)
        status = "pass" if still else "stale"
        detail = what if still else f"declared, but no longer reproduces: {what}"
        o = report.Outcome(f"limitation:{lim.name}", harness.runtime, status, float("nan"), detail)
        _record(request.node, o, variant)
        assert still, f"limitation {lim.name} on {harness.runtime}: {detail}"

    return run


def _record_adapter(node: pytest.Item, harness: Session) -> None:
    info = {harness.runtime: harness.adapter()["info"]}
    if browser := getattr(harness, "browser_version", None):  # which browser build ran it
        info[harness.runtime] = {**info[harness.runtime], "browser": browser}
    node.user_properties.append((ADAPTER_PROPERTY, json.dumps(info)))


def _keep_artifacts(
    request: pytest.FixtureRequest,
    harness: Session,
    variant: str,
    case: Case,
    draw: int,
    result: CaseResult | None,
    verdict: str,
    mark: int,
    tracing: bool = False,
) -> None:
    """A case run's artifacts under --output (artifacts.py), unless --artifacts none; the
    folder is named in the test's report (a section pytest prints under a failure)."""
    config = request.config
    if config.getoption("--artifacts") == "none":
        if tracing:
            harness.trace_stop(None)  # type: ignore[attr-defined]
        return
    console = getattr(harness, "console", None)
    replay = artifacts.replay_command(
        case,
        harness.runtime,
        variant,
        draw=draw,
        shaders=config.getoption("--shaders"),
        variant_files=config.harness_variant_files,
    )
    folder = artifacts.write(
        artifacts.folder_for(Path(config.getoption("--output")), request.node.nodeid),
        inputs=inputs_for(case, variant, draw),
        result=result,
        verdict=verdict,
        console=console.since(mark) if console is not None else None,
        replay=replay,
    )
    if tracing:  # `playwright show-trace trace.zip`
        harness.trace_stop(folder / "trace.zip")  # type: ignore[attr-defined]
    request.node.add_report_section("call", "py-harness artifacts", f"{folder}\nreplay: {replay}")


def _record(node: pytest.Item, o: report.Outcome, variant: str, outputs: str = "") -> None:
    row = {**o.to_json(), "variant": variant, "outputs_file": outputs}
    node.user_properties.append((OUTCOME_PROPERTY, json.dumps(row)))


# ---- reporting: the matrix, disagreements, JSON -----------------------------------------
def process_age_s() -> float:
    """Seconds since this process started (Linux's /proc, to 10 ms); 0 where unknown."""
    try:
        with open("/proc/self/stat") as f:
            # Field 22 (after the command in parentheses, which may hold spaces): clock
            # ticks from boot to the start.
            started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            return max(0.0, float(f.read().split()[0]) - started)
    except (OSError, ValueError, IndexError):
        return 0.0


class Results:
    """Collects the outcomes run_case and check_limitation record (in this process or, under
    pytest-xdist, in a worker: user_properties travel with the report), then prints the
    case x runtime matrix and the disagreements, and writes --harness-json."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: list[dict[str, Any]] = []
        self.adapters: dict[str, Any] = {}
        # Counted from the command's start where the system says when that was (`check`
        # and `pytest` alike), else from here (configure).
        self.t0 = time.perf_counter() - process_age_s()
        self.first_result_s: float | None = None  # the command's start to the first verdict

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == OUTCOME_PROPERTY and report.when == "call":
                self.rows.append(json.loads(value))
                if self.first_result_s is None:
                    self.first_result_s = time.perf_counter() - self.t0
            elif key == ADAPTER_PROPERTY:
                self.adapters.update(json.loads(value))

    def _ordered(self) -> list[dict[str, Any]]:
        """The rows in --variant, --runtime and case-matrix order, not in the order they
        arrived: under pytest-xdist that order depends on scheduling, and the matrix, the
        JSON and which runtime is named first in a disagreement must not."""
        variants = {v: i for i, v in enumerate(self.config.harness_variants)}
        runtimes = {r: i for i, r in enumerate(self.config.harness_runtimes)}
        cases = {v: _order(v) for v in variants}

        def key(r: dict[str, Any]) -> tuple[int, int, int, str]:
            # Limitations' rows ("limitation:NAME") first, as the matrix shows them.
            v, rt = variants.get(r["variant"], -1), runtimes.get(r["runtime"], -1)
            order = cases.get(r["variant"], {})
            return (
                v,
                rt,
                order.get(r["case"], len(order) if r["case"][:4] != "lim" else -1),
                r["case"],
            )

        return sorted(self.rows, key=key)

    def outside(self) -> dict[str, list[tuple[str, str]]]:
        """Per variant with an envelope, the fixed matrix's cases outside it: not run and
        not red, but counted (none where --case chose the cases)."""
        if self.config.harness_cases:
            return {}
        out = {}
        for name in self.config.harness_variants:
            if variant_registry.get(name).envelope is not None:
                out[name] = generated.outside(variant_registry.get(name))
        return out

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows or hasattr(self.config, "workerinput"):
            return
        rows, write = self._ordered(), terminalreporter.write_line
        runtimes = list(dict.fromkeys(r["runtime"] for r in rows))
        compared = report.disagreements(rows)
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = [r for r in rows if r["variant"] == variant]
            terminalreporter.section(f"py-harness: {variant}, case x runtime (error / bound)")
            ids = list(dict.fromkeys(r["case"] for r in mine))  # in _ordered's order
            write(report.matrix(mine, runtimes, ids))
            theirs = sorted(
                (d for d in compared if d["variant"] == variant), key=lambda d: -d["ratio_to_bound"]
            )
            if len(runtimes) > 1 and theirs:
                write("where runtimes disagree most, per case (difference / the rule's bound):")
                write(report.format_disagreements(theirs))
        outside = self.outside()
        for variant, cases in outside.items():
            write(_outside_line(variant, cases))
        wall = time.perf_counter() - self.t0
        write(f"py-harness: first verdict after {self.first_result_s:.1f} s, wall {wall:.1f} s")
        path = self.config.getoption("--harness-json")
        if path:
            folder = Path(path).resolve().parent
            for row in rows:  # relative to the JSON: the folder may move to another machine
                if row.get("outputs_file"):
                    saved = Path(row["outputs_file"]).resolve()
                    if saved.is_relative_to(folder):
                        row["outputs_file"] = str(saved.relative_to(folder))
            summary = {
                "machine": report.machine_name(),
                "variants": self.config.harness_variants,
                "draws": self.config.getoption("--draws"),
                "runtimes": runtimes,
                "adapters": self.adapters,
                "results": rows,
                "disagreements": compared,
                "outside_envelope": outside,
                "wall_s": time.perf_counter() - self.t0,
                "first_result_s": self.first_result_s,
            }
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=1))
            write(f"py-harness: results written to {path}")
