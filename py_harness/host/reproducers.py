"""Each declared limitation's reproducer: a run on a session that shows the cause is still
there (judge/limitations.py declares what each limitation is and which cases it covers).

They live here, beside the engine, because they run kernels and probes on a session:
judging takes arrays and imports no session. `check` and tests/test_limitations.py run
each reproducer on every runtime whose adapter its limitation names, and one that no longer
reproduces fails, so the declarations cannot go stale.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..config import AttentionConfig
from .judge import loop_budget
from .judge.limitations import LAVAPIPE_LOOPS, SEED_SCALING, WGPU_NATIVE_ZEROING, Limitation
from .wire import Caller, run_on

# A reproducer's answer: (still reproduces, what it measured).
Reproducer = Callable[[Caller], tuple[bool, str]]


def seed_scaling_probe() -> tuple[AttentionConfig, dict[str, np.ndarray]]:
    """One key per row (every P is exactly 1) with logits of tens, at head_dim 59 (a scale
    that is not a power of two)."""
    shape = (2, 1, 8, 59)
    cfg = AttentionConfig(batch=2, num_heads=8, seq_q=1, seq_k=1, head_dim=59)
    rng = np.random.default_rng(7)
    x = {n: rng.standard_normal(shape, dtype=np.float32) for n in ("q", "k", "v", "d_out")}
    x["q"] *= np.float32(5)
    x["k"] *= np.float32(3)
    return cfg, x


def _seed_scaling_reproduces(session: Caller) -> tuple[bool, str]:
    """One key per row (P must be exactly 1) with logits of tens: the seed's dV is then
    P' dO with P' = exp(s_K - lse_Q) != 1 for some rows. (A kernel whose scores are
    consistent gets dO exactly: tests/test_limitations.py checks the fast variant does.)"""
    cfg, x = seed_scaling_probe()
    dv = run_on(session, cfg, x, variant="seed")["arrays"]["dv"]
    off = int(np.count_nonzero(dv != x["d_out"]))
    return off > 0, f"seed dV != dO (P != 1) in {off} of {dv.size} elements"


# What probes.probe_loops returns under a budget of 65535 passes (see probes.py).
LOOP_PROBE_UNDER_BUDGET = {"single": loop_budget.BUDGET, "nested": [643, 64251, 1]}


def _loop_budget_reproduces(session: Caller) -> tuple[bool, str]:
    got = session.call("probe_loops", {})
    seen = {k: got[k] for k in LOOP_PROBE_UNDER_BUDGET}
    single, outer, inner = got["asked"][0], got["asked"][1], got["asked"][2]
    what = (
        f"a loop of {single:,} passes ran {got['single']:,}; {outer} passes of a loop of "
        f"{inner} ran {got['nested'][0]} and {got['nested'][1]:,}"
    )
    return seen == LOOP_PROBE_UNDER_BUDGET, what


def _workgroup_zero_reproduces(session: Caller) -> tuple[bool, str]:
    got = session.call("probe_workgroup_zero", {})
    what = f"{got['nonzero']:,} of {got['words']:,} workgroup words not zero at a workgroup's start"
    return got["nonzero"] > 0, what


# By the limitation's name; tests/test_limitations.py checks every declared one has its own.
REPRODUCERS: dict[str, Reproducer] = {
    SEED_SCALING.name: _seed_scaling_reproduces,
    LAVAPIPE_LOOPS.name: _loop_budget_reproduces,
    WGPU_NATIVE_ZEROING.name: _workgroup_zero_reproduces,
}


def reproduce(limitation: Limitation, session: Caller) -> tuple[bool, str]:
    """Run `limitation`'s reproducer on `session`: (still reproduces, what it measured)."""
    return REPRODUCERS[limitation.name](session)
