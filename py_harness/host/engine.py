"""Run a case on a session and judge it: what pytest's plugin and the CLI share.

Judging itself takes arrays (judge/); runtimes (runtimes/) give sessions; this module is
where the two meet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import numpy as np

from ..config import AttentionConfig
from ..gpu.device import ShaderCompileError
from ..kernels import DEFAULT_VARIANT, Variant
from . import variants
from .judge.cases import Case
from .judge.inputs import CaseResult, judge_case, make_inputs
from .judge.limitations import case_coverage
from .judge.verdict import REFERENCE_CACHE, Precision
from .runtimes.registry import runtime
from .runtimes.sessions import Session
from .wire import run_on


def inputs_for(case: Case, variant: str, draw: int = 0) -> dict[str, np.ndarray]:
    """The inputs a run of the case gets on draw `draw`: make_inputs, rounded to what the
    variant's tensors store (f16 where it declares f16)."""
    return variants.precision(variant).round_inputs(make_inputs(case, draw))


def evaluate(
    case: Case,
    session: Session,
    *,
    sources: dict[str, str] | None = None,
    variant: str = DEFAULT_VARIANT,
    draw: int = 0,
    backward: bool = True,
) -> CaseResult:
    """Run a case on input draw `draw` in a session and judge it (judge_case). sources:
    the WGSL to run (default: the variant's own files). backward: False runs and judges the
    forward alone (O and the LSE): where that fails, the whole case fails."""
    precision = variants.precision(variant)
    x = inputs_for(case, variant, draw)
    runs = 2 if case.repeat_backward else 1
    own = variants.get(variant)
    cfg = case.config()
    backward = backward and bool(own.backward)
    given = given_outputs(own, cfg, x, precision)
    reply = run_on(
        session,
        cfg,
        x | given,
        sources=sources,
        backward=backward,
        backward_runs=runs,
        variant=variant,
    )
    return judge_case(
        case,
        x,
        reply,
        runtime=session.runtime,
        variant=variant,
        draw=draw,
        backward=backward,
        produced=own.outputs,
        given=given,
        precision=precision,
    )


def given_outputs(
    own: Variant, cfg: AttentionConfig, x: dict[str, np.ndarray], precision: Precision
) -> dict:
    """What a backward-only variant reads instead of a forward's outputs: O and the LSE of
    the float64 reference, rounded to float32 (the judge's own, from its cache), and to
    f16 where the variant stores them so."""
    if own.forward is None:
        ref64 = REFERENCE_CACHE.get(cfg, x, precision)[0]
        given = {n: ref64[n].astype(np.float32) for n in ("o", "lse")}
        return precision.round_inputs(given) | {"lse": given["lse"]}  # the LSE: the plan's
    return {}


def compile_error(exc: BaseException) -> str | None:
    """The compiler's message (file:line:column, its words, the source line) where `exc`
    is WGSL that did not compile, raised in this process or in a page or a worker (which
    send it as a typed error: py_harness/errors.py); else None."""
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, ShaderCompileError) else None


def evaluate_forward_first(
    case: Case, session: Session, *, sources: dict[str, str] | None = None, variant: str
) -> CaseResult:
    """The whole case's verdict, with the forward run alone first: where the forward fails
    the whole case does, and the backward's pipelines (most of a mutated kernel's compile
    on a CPU driver) are never built. What judges an edited kernel (planted bugs, mutate)."""
    own = variants.get(variant)
    if own.forward is None or not own.backward:  # one half only: nothing to run first
        return evaluate(case, session, sources=sources, variant=variant)
    result = evaluate(case, session, sources=sources, variant=variant, backward=False)
    return evaluate(case, session, sources=sources, variant=variant) if result.passed else result


def judged_cases(cases: Iterable[Case], variant: str, adapter: str) -> list[Case]:
    """The cases that get a verdict for `variant` on the adapter: none a declared driver
    limitation or kernel flaw covers there, none the variant does not support."""
    own = variants.get(variant)
    return [
        c
        for c in cases
        if case_coverage(variant, adapter, c) is None
        and own.for_head_dim(c.head_dim).refusal(c.config()) is None
    ]


@contextlib.contextmanager
def open_session(name: str) -> Iterator[Session]:
    """Launch a runtime (and the page server, for browsers) and open one harness session,
    outside pytest (bench, benchmarks/); pytest's plugin does the same with fixtures."""
    rt = runtime(name)
    with contextlib.ExitStack() as stack:
        base_url = ""
        if rt.needs_server:
            from .dist.build_wheel import build
            from .serving.server import start_server, stop

            build(log=lambda _msg: None)
            server, base_url = start_server()
            stack.callback(stop, server)
        handle = stack.enter_context(rt.launch())
        session = handle.new_session(base_url)
        stack.callback(handle.close_session, session)
        yield session
