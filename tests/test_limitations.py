"""Known limitations declared by cause (py_harness/host/judge/limitations.py).

The rules that say which cases a limitation covers are checked against what was measured
(the loop-count model's break points, the cases each covers), and on every runtime each
declared limitation whose adapter is there must still reproduce: a stale declaration
fails here, as it does in `check`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from py_harness.config import AttentionConfig
from py_harness.gpu.device import rolls_loops
from py_harness.host.judge import loop_budget
from py_harness.host.judge.cases import CASES, Case, by_id
from py_harness.host.judge.limitations import (
    DRIVER,
    LAVAPIPE_LOOPS,
    LIMITATIONS,
    SEED_SCALING,
    WGPU_NATIVE_ZEROING,
    case_coverage,
    single_key_rows,
)
from py_harness.host.judge.verdict import judge_outputs
from py_harness.host.reproducers import (
    LOOP_PROBE_UNDER_BUDGET,
    REPRODUCERS,
    reproduce,
    seed_scaling_probe,
)
from py_harness.host.runtimes.sessions import Session
from py_harness.host.variants import get
from py_harness.host.wire import run_on

LAVAPIPE = "llvmpipe llvmpipe (LLVM 15.0.6, 256 bits) Mesa 22.3.6 (LLVM 15.0.6)"
LAVAPIPE_128 = "llvmpipe llvmpipe (LLVM 15.0.6, 128 bits) Mesa 22.3.6 (LLVM 15.0.6)"
# Firefox's page sees an empty adapter.info: the host names its adapter from wgpu's log
FIREFOX = "firefox/wgpu llvmpipe (LLVM 15.0.6, 256 bits) Mesa 22.3.6 (LLVM 15.0.6) Vulkan"
PACKED_KV = Path(__file__).resolve().parents[1] / "examples/packed-kv/kernels/packed_kv.toml"


def _largest(ok, lo: int, hi: int) -> int:
    """The largest x in [lo, hi] with ok(x), for ok true and then false."""
    assert ok(lo) and not ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _within(kernels: str, entry: str, cfg: AttentionConfig, lanes: int) -> bool:
    """Whether `entry` of `kernels` ("seed", "fast" with the steps GPUs get written out, or
    "fast-rolled", the loops the CPU drivers run) stays within lavapipe's budget, by the
    model, with one part per key tile (as the fast kernels ran when the edges were measured)."""
    variant, rolled = kernels.removesuffix("-rolled"), kernels.endswith("-rolled")
    counts = loop_budget.loop_counts(variant, cfg, lanes, kv_parts=1, rolled=rolled)
    return counts[entry] <= loop_budget.OK_LIMIT


def _edge(kernels: str, entry: str, vary: str, lanes: int, hi: int, **cfg: object) -> int:
    """The largest `vary` below `hi` within the budget (`_within`)."""
    return _largest(
        lambda n: _within(kernels, entry, AttentionConfig(**{**cfg, vary: n}), lanes), 1, hi
    )


# The largest size whose outputs lavapipe (Mesa 22.3.6) still gets right, found by bisecting
# the unmodified kernels against float64 (docs/verdict.md): the model must agree exactly.
# The fast key-tile passes' edges were measured before they split key tiles into parts
# (Variant.kv_parts): with one part, the same loops; with the parts the runner now chooses
# for one key tile, no such edge is left below 100,000 queries. The fast forward's, at
# head_dim 1 (at 64 and above the edge needs more than lavapipe's 128 MiB bindings in the
# written-out form). Each form of the fast GEMMs' steps has its own edges: lavapipe runs
# the loops (FF_ROLLED, their P V steps' count hidden from its compiler by ff_trips)
# through wgpu, the written-out steps in Firefox.
MEASURED_EDGES = [
    ("seed", "flash_fwd", "seq_k", 8, dict(seq_q=4, head_dim=32), 3119),
    ("seed", "flash_fwd", "seq_k", 8, dict(seq_q=4, head_dim=64), 1743),
    ("seed", "flash_fwd", "seq_k", 8, dict(seq_q=4, head_dim=128), 925),
    ("seed", "flash_fwd", "seq_k", 8, dict(seq_q=4, head_dim=111), 1047),
    ("seed", "flash_fwd", "window", 8, dict(seq_q=16, seq_k=8000, head_dim=64,
                                             causal_offset=4000), 867),
    ("seed", "flash_fwd", "window", 4, dict(seq_q=16, seq_k=8000, head_dim=64,
                                             causal_offset=4000), 869),
    ("seed", "flash_bwd_dq", "seq_k", 8, dict(seq_q=4, head_dim=64), 1216),
    ("seed", "flash_bwd_dq", "seq_k", 8, dict(seq_q=4, head_dim=21), 2765),  # C = 65536 there
    ("seed", "flash_bwd_dk_dv", "seq_q", 8, dict(seq_k=16, head_dim=111, num_heads=6,
                                                  num_kv_heads=1), 182),
    ("seed", "flash_bwd_dk_dv", "seq_q", 8, dict(seq_k=2048, head_dim=32, num_heads=8,
                                                  num_kv_heads=1, causal=True,
                                                  causal_offset=2048 - 420), 420),
    ("fast", "fa2f_fwd", "seq_k", 8, dict(seq_q=4, head_dim=1), 699040),
    ("fast-rolled", "fa2f_fwd", "seq_k", 8, dict(seq_q=4, head_dim=1), 110368),
    ("fast", "fa2f_bwd_dk_dq", "seq_q", 8, dict(seq_k=64, head_dim=128), 199688),
    ("fast-rolled", "fa2f_bwd_dk_dq", "seq_q", 8, dict(seq_k=64, head_dim=128), 28496),
    ("fast", "fa2f_bwd_dk_dv", "seq_q", 8, dict(seq_k=64, head_dim=64, num_heads=2,
                                                 num_kv_heads=1), 38784),
    ("fast-rolled", "fa2f_bwd_dk_dv", "seq_q", 8, dict(seq_k=64, head_dim=64, num_heads=2,
                                                        num_kv_heads=1), 17472),
]  # fmt: skip


@pytest.mark.parametrize("kernels, entry, vary, lanes, cfg, measured", MEASURED_EDGES)
def test_loop_model_meets_the_measured_edges(kernels, entry, vary, lanes, cfg, measured):
    if vary == "seq_q" and cfg.get("causal"):  # bottom-right: the offset follows seq_q
        base = {"batch": 1, "num_heads": 1, **cfg}

        def ok(n: int) -> bool:
            c = AttentionConfig(**{**base, "seq_q": n, "causal_offset": cfg["seq_k"] - n})
            return _within(kernels, entry, c, lanes)

        assert _largest(ok, 1, cfg["seq_k"]) == measured
        return
    cfg = {"batch": 1, "num_heads": 1, "seq_q": 1, "seq_k": 1, "head_dim": 1, **cfg}
    assert _edge(kernels, entry, vary, lanes, measured + 1000, **cfg) == measured


def test_loop_budget_covers_by_count_on_lavapipe_only():
    covered = {c.id for c in CASES if case_coverage("seed", LAVAPIPE, c)}
    # the two cases the old list named by shape, now by cause, and the long reductions
    assert {"d111-sq203-sk113-mqa6x1", "d128-sq16-sk1024-mqa2x1", "d64-sq256-sk64-mqa16x1",
            "d64-sq1-sk2048-mqa4x1", "d64-sq4096-sk4096-mqa4x1-causal"} <= covered  # fmt: skip
    assert "d64-sq128-sk128-b2-h4" not in covered
    why = case_coverage("seed", LAVAPIPE, by_id("d128-sq16-sk1024-mqa2x1"))
    assert why.limitation is LAVAPIPE_LOOPS and why.status == "unsupported"
    assert why.reason.startswith("flash_bwd_dq needs 104,587 loop passes")  # fwd: 72,457
    assert "65,535" in why.reason
    swiftshader = "google swiftshader SwiftShader Device (Subzero)"
    assert not any(
        case_coverage(v, swiftshader, c) and case_coverage(v, swiftshader, c).limitation.kind
        == DRIVER for v in ("seed", "fast") for c in CASES
    )  # fmt: skip
    # the fast kernels stay inside the budget on the whole matrix, in either form: wgpu's
    # loops and Firefox's written-out steps
    assert loop_budget.rolled_loops(LAVAPIPE) and not loop_budget.rolled_loops(FIREFOX)
    for adapter in (LAVAPIPE, FIREFOX):
        assert {c.id for c in CASES if case_coverage("fast", adapter, c)} == set()
    for rolled in (False, True):
        # dK/dQ over 200,000 queries: past the measured edges as one part; in parts, within
        big = AttentionConfig(1, 1, 200_000, 64, 128)
        counts = loop_budget.loop_counts("fast", big, kv_parts=1, rolled=rolled)
        assert counts["fa2f_bwd_dk_dq"] > 65536
        assert loop_budget.over_budget("fast", big, rolled=rolled) == {}
        # many key tiles, so one part each, over few dQ sums (4 fit lavapipe's binding):
        # each workgroup walks 64 key tiles x 1024 query tiles
        assert "fa2f_bwd_dk_dq" in loop_budget.over_budget(
            "fast", AttentionConfig(1, 1, 65536, 16384, 128), rolled=rolled
        )
    assert loop_budget.lanes_of(LAVAPIPE) == 8 and loop_budget.lanes_of(LAVAPIPE_128) == 4


def test_seed_scaling_covers_single_key_rows_and_large_logits_where_the_scale_is_inexact():
    assert single_key_rows(by_id("d109-sq7-sk1-h3-win1").config()) == (1, 1)
    # row 0 of a causal case sees one key, but every later row sees it too
    assert single_key_rows(by_id("d59-sq113-sk203-gqa6x2-causal").config()) == (1, 0)
    runs = [c for c in CASES if get("seed").refusal(c.config()) is None]
    covered = {c.id for c in runs if case_coverage("seed", "any", c)}
    assert covered == {"d3-sq1-sk1-h4", "d109-sq7-sk1-h3-win1", "d32-sq5-sk17-gqa6x2-causal-big"}
    # head_dim 64: a scale of 1/8 is exact, and the flaw cannot show
    assert single_key_rows(by_id("d64-sq512-sk1-mqa4x1").config()) == (512, 512)
    assert case_coverage("seed", "any", by_id("d64-sq512-sk1-mqa4x1")) is None
    # logits of tens without a single-key row (found by py-harness explore), unless the
    # scale is exact
    wide = Case(5, 92, 31, num_heads=3, num_kv_heads=3, causal=True, offset=18, large_logits=True)
    assert single_key_rows(wide.config()) == (0, 0) and case_coverage("seed", "any", wide)
    assert case_coverage("seed", "any", by_id("d64-sq17-sk128-h4-big")) is None
    assert not any(case_coverage("fast", "any", c) for c in CASES)
    assert SEED_SCALING.variants == ("seed",)


def test_every_declared_limitation_has_its_reproducer() -> None:
    """A declaration without a run that shows its cause could never go stale."""
    assert set(REPRODUCERS) == {lim.name for lim in LIMITATIONS}


@pytest.mark.browser
def test_declared_limitations_reproduce(harness: Session) -> None:
    adapter = harness.adapter_name()
    for lim in LIMITATIONS:
        if lim.applies_to(adapter, harness.runtime):
            still, what = reproduce(lim, harness)
            assert still, f"{lim.name} is declared for {adapter} but no longer reproduces: {what}"
    if LAVAPIPE_LOOPS.applies_to(adapter):
        # the loop model counts the form the runner chose from the page's adapter.info
        assert rolls_loops(harness.adapter()["info"]) == loop_budget.rolled_loops(adapter)
    else:  # the budget is lavapipe's alone
        got = harness.call("probe_loops", {})
        assert got["single"] == got["asked"][0] != LOOP_PROBE_UNDER_BUDGET["single"]
    if not WGPU_NATIVE_ZEROING.applies_to(adapter, harness.runtime):
        # WGSL's zeroing, here Tint's own on SwiftShader (gpu/device.py): the probe's
        # second dispatch finds zeros, not the first one's pattern.
        got = harness.call("probe_workgroup_zero", {})
        assert got == {"words": got["words"], "nonzero": 0} and got["words"] > 0, got


@pytest.mark.browser
def test_seed_scaling_probe_gets_p_1_from_consistent_scores(harness: Session) -> None:
    """The reproducer's premise: a kernel whose scores and LSE agree gets dV = dO exactly
    there (every P is 1), so a seed dV != dO is its flaw, not the probe's."""
    cfg, x = seed_scaling_probe()
    assert np.array_equal(run_on(harness, cfg, x, variant="fast")["arrays"]["dv"], x["d_out"])


@pytest.mark.browser
def test_loop_budget_edge_on_lavapipe(harness: Session) -> None:
    """The seed's forward at head_dim 64 is right over 1743 keys and wrong over 1744, as the
    model says: the declared rule matches the driver, key for key."""
    if not LAVAPIPE_LOOPS.applies_to(harness.adapter_name()):
        pytest.skip("lavapipe's loop budget: not this adapter's")
    ratios = {}
    for seq_k in (1743, 1744):
        cfg = AttentionConfig(1, 1, 4, seq_k, 64)
        rng = np.random.default_rng(seq_k)
        x = {
            n: rng.standard_normal(s, dtype=np.float32)
            for n, s in (("q", (1, 4, 1, 64)), ("k", (1, seq_k, 1, 64)), ("v", (1, seq_k, 1, 64)))
        }
        x["d_out"] = x["q"]
        got = run_on(harness, cfg, x, variant="seed")["arrays"]
        reports, _ = judge_outputs(cfg, x, {"o": got["o"], "lse": got["lse"]})
        ratios[seq_k] = max(r.ratio for r in reports)
        lanes = loop_budget.lanes_of(harness.adapter_name())
        over = loop_budget.over_budget("seed", cfg, lanes)
        assert ("flash_fwd" in over) == (seq_k == 1744)
    assert ratios[1743] <= 1 < 1e3 < ratios[1744], ratios


def test_a_file_variant_takes_the_limitations_it_names() -> None:
    """examples/packed-kv keeps the seed's loops (limitations_of = "seed"): lavapipe's loop
    budget and the seed's flaw cover its cases as they cover the seed's."""
    from py_harness.host import variants

    before = variants.snapshot()  # the tests after this one, in this process, see no file
    try:
        name = variants.load_file(PACKED_KV)
        for case in CASES:
            seed, packed = (case_coverage(v, LAVAPIPE, case) for v in ("seed", name))
            assert (seed and str(seed)) == (packed and str(packed)), case.id
        assert any(case_coverage(name, LAVAPIPE, c) for c in CASES)  # it does cover some
    finally:
        variants.restore(before)
