"""Where one binding caps the fast backward's partial sums of dQ below what fills the GPU (at
S = 32768 on an H200: 7 sums of 16), the key tiles' parts make up the rest (Variant.kv_parts):
each of a sum's workgroups takes the same rows of every tile it reaches, round after round,
whatever the mask.
A CPU adapter's binding is far too large for these sizes to reach it, so the child lowers its
device's maxStorageBufferBindingSize (what Split.of reads) to force 2 sums over 5 key tiles,
and the outputs are judged as the matrix judges them."""

from __future__ import annotations

import pytest

from py_harness.host.judge.cases import Case, varlen
from tests.native_child import NATIVE, child_report

# (case, the split it must run in: dq_slots, kv_parts, dq_band_rows)
CASES = [
    # one head: 16 query tiles in 2 parts of 8, the same in each of 3 rounds
    (Case(16, 1024, 320, num_heads=1, num_kv_heads=1), (2, 2, 0)),
    # three heads over one KV head: 48 query tiles in 6 parts of 8, each from every head
    (Case(16, 1024, 320, num_heads=3, num_kv_heads=1), (2, 6, 0)),
    # causal (bottom-right: the first 704 queries see no key): a key tile's query range
    # starts later in each round, and the parts still take the same aligned tiles
    (Case(16, 1024, 320, num_heads=3, num_kv_heads=1, causal=True, bottom_right=True), (2, 6, 0)),
    # a left window: the ranges' ends move too, and the sums are zeroed after each run
    (Case(16, 1024, 320, num_heads=3, num_kv_heads=1, window_left=100), (2, 6, 0)),
    # a variable-length batch: each key tile's parts share out its own sequence's query tiles
    # (11, 3 or none, x 3 heads) in 4 parts, and a sum's rounds reach tiles of every sequence
    (varlen(16, (700, 130, 0), (320, 200, 64), num_heads=3, num_kv_heads=1), (2, 4, 0)),
]


def _capped_binding(case: Case, slots: int) -> int:
    """The binding size that leaves room for the row stats and `slots` partial sums of dQ."""
    cfg = case.config()
    rows = cfg.num_heads * cfg.total_q
    return 4 * (2 * rows + slots * rows * cfg.head_dim) + 16


async def _capped_report(impl: str) -> list[dict]:
    """Per case: the split the runner chose under the lowered binding, and each output's
    verdict (in a child process of the runtime's environment, as tests/native_child.py)."""
    from py_harness import runner
    from py_harness.host.gpu import native
    from py_harness.host.judge.inputs import make_inputs
    from py_harness.host.judge.verdict import judge_outputs
    from py_harness.host.paths import shader_sources
    from py_harness.host.wire import decode_outputs
    from py_harness.kernels import variant

    dev = await native.request_device(implementation=impl)
    full = dev.limits
    run = runner.AttentionRunner(dev, shader_sources(), variant("fast"))
    report = []
    for case, _ in CASES:
        cfg = case.config()
        dev.limits = {**full, "maxStorageBufferBindingSize": _capped_binding(case, 2)}
        chosen = run.variant.for_head_dim(cfg.head_dim, dev.limits)
        split = runner.Split.of(chosen, cfg, dev.limits)
        x = make_inputs(case)
        tensors = {n: a.astype("<f4").tobytes() for n, a in x.items()}
        got = decode_outputs(cfg, (await run.run(cfg, tensors)).outputs)
        reports, _ = judge_outputs(cfg, x, got)
        report.append(
            {
                "split": [split.dq_slots, split.kv_parts, split.dq_band_rows],
                "failed": [str(r) for r in reports if not r.passed],
            }
        )
    dev.destroy()
    return report


@pytest.mark.parametrize("impl", NATIVE)
def test_parts_make_up_for_capped_sums(impl: str) -> None:
    report = child_report(impl, "tests.test_capped_sums", "_capped_report")
    want = [{"split": list(split), "failed": []} for _, split in CASES]
    assert report == want, report
