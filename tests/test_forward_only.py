"""A run of the forward alone (run_on / evaluate with backward=False): what the planted-bug
check runs first, so that a bug the forward shows costs no backward compile. It must give
the whole run's O and LSE bit for bit (where it fails, the whole case fails), build no
backward pipeline, and never pass off a reply without gradients as a whole run."""

from __future__ import annotations

import numpy as np
import pytest

from py_harness.host.judge import verdict
from py_harness.host.judge.cases import CONTROL
from py_harness.host.judge.inputs import judge_case, make_inputs
from py_harness.host.paths import shader_sources
from py_harness.host.runtimes.sessions import Session
from py_harness.host.wire import run_on
from py_harness.kernels import VARIANTS


@pytest.mark.browser
def test_the_forward_alone_gives_the_whole_runs_o_and_lse_and_builds_no_backward(
    harness: Session, variant: str
) -> None:
    name = variant  # each built-in variant the run selects (skipped where it cannot run)
    cfg, x = CONTROL.config(), make_inputs(CONTROL)
    whole = run_on(harness, cfg, x, variant=name)["arrays"]
    # a backward that does not compile (each file only the backward's modules hold): a
    # forward alone must not build it
    own = VARIANTS[name].for_head_dim(cfg.head_dim)
    sources = shader_sources()
    backward_only = {f for k in own.backward for f in k.files} - set(own.forward.files)
    assert backward_only
    for file in backward_only:
        sources[file] = "let broken = ;\n" + sources[file]
    alone = run_on(harness, cfg, x, sources=sources, backward=False, variant=name)["arrays"]
    assert sorted(alone) == ["lse", "o"]
    for output in alone:
        assert np.array_equal(alone[output], whole[output], equal_nan=True), output


def test_a_reply_without_gradients_fails_a_whole_run_and_passes_a_forward_alone() -> None:
    cfg, x = CONTROL.config(), make_inputs(CONTROL)
    baseline = verdict.references(cfg, x, np.float32)  # float32's own outputs pass
    reply = {"arrays": {n: baseline[n] for n in ("o", "lse")}}
    alone = judge_case(CONTROL, x, reply, runtime="none", backward=False)
    assert alone.passed, alone.failures()
    assert [r.name for r in alone.reports] == ["o", "lse"]
    # the control case runs its backward twice, bit for bit: no such check without one
    assert "bit-identical backward" not in alone.checks
    whole = judge_case(CONTROL, x, reply, runtime="none")
    assert not whole.passed
    assert "the reply lacks dq, dk, dv" in whole.failures(), whole.failures()
